// A 2-D scale-and-shift with its host code and no spec: the spec is inferred.
#include <cuda_runtime.h>
#include <vector>

__global__ void scale_shift(const float* in, float* out, int rows, int cols, float scale)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        out[r * cols + c] = in[r * cols + c] * scale + 1.0f;
    }
}

__global__ void accumulate(float* acc, const float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) acc[i] += x[i];
}

int main()
{
    const int ROWS = 2048;
    const int COLS = 3000;
    float* d_in = nullptr;
    float* d_out = nullptr;
    cudaMalloc(&d_in, ROWS * COLS * sizeof(float));
    cudaMalloc(&d_out, sizeof(float) * ROWS * COLS);
    dim3 block(32, 8);
    dim3 grid((COLS + block.x - 1) / block.x, (ROWS + block.y - 1) / block.y);
    scale_shift<<<grid, block>>>(d_in, d_out, ROWS, COLS, 2.0f);
    cudaDeviceSynchronize();
    return 0;
}
