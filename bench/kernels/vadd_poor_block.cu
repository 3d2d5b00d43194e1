// Vector add, launched the way a first draft often is: one element per thread, 32 threads
// per block.  `cuda-agent optimize vadd_poor_block.cu --diff` finds the block size, vector
// loads and a grid-stride loop.
#include <cstdio>
#include <cuda_runtime.h>

// c = a + b
// @cuda-agent sizes n=1<<26 verify n=1000,4097,65539
// @cuda-agent launch grid=cdiv(n, block) block=32
// @cuda-agent arg a in float[n] uniform(-1, 1)
// @cuda-agent arg b in float[n] uniform(-1, 1)
// @cuda-agent arg c out float[n]
// @cuda-agent arg n = n
__global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

int main() {
    const int n = 1 << 26;
    const int threads = 32;
    float *a, *b, *c;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    cudaMalloc(&c, n * sizeof(float));
    vadd<<<(n + threads - 1) / threads, threads>>>(a, b, c, n);
    cudaDeviceSynchronize();
    printf("done\n");
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return 0;
}
