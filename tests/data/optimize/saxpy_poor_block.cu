// y = alpha * x + y over n floats, launched with a poor block size (32 threads per block).
#include <cstdio>
#include <cuda_runtime.h>

// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=32
// @cuda-agent arg alpha = 2
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y inout float[n] uniform(-1, 1)
__global__ void saxpy(int n, float alpha, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = alpha * x[i] + y[i];
    }
}

int main() {
    const int n = 1 << 24;
    float *x, *y;
    cudaMalloc(&x, n * sizeof(float));
    cudaMalloc(&y, n * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    cudaMemset(y, 0, n * sizeof(float));
    saxpy<<<(n + 31) / 32, 32>>>(n, 2.0f, x, y);
    cudaDeviceSynchronize();
    printf("done\n");
    cudaFree(x);
    cudaFree(y);
    return 0;
}
