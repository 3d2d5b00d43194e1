// Causal attention scores with the per-element product chosen at compile time: the kernel takes
// a __device__ function as a template argument (only the lower triangle is computed).
#include <cuda_runtime.h>
#include "common.h"

typedef float (*tri_fn)(const float*, const float*, int, int, int);

__device__ float matmul_tri_naive(const float* q, const float* k, int i, int j, int C) {
    float acc = 0.0f;
    for (int c = 0; c < C; c++) {
        acc += q[i * C + c] * k[j * C + c];
    }
    return acc;
}

template <tri_fn product>
__global__ void trimul_global(float* out, const float* q, const float* k, int T, int C) {
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < T && j <= i) {
        out[i * T + j] = product(q, k, i, j, C);
    }
}

void trimul(float* out, const float* q, const float* k, int T, int C) {
    dim3 block(16, 16);
    dim3 grid(ceil_div(T, 16), ceil_div(T, 16));
    trimul_global<matmul_tri_naive><<<grid, block>>>(out, q, k, T, C);
    cudaCheck(cudaGetLastError());
}

int main() {
    int T = 1024;
    int C = 64;
    float *d_out, *d_q, *d_k;
    cudaCheck(cudaMalloc(&d_out, T * T * sizeof(float)));
    cudaCheck(cudaMalloc(&d_q, T * C * sizeof(float)));
    cudaCheck(cudaMalloc(&d_k, T * C * sizeof(float)));
    trimul(d_out, d_q, d_k, T, C);
    cudaCheck(cudaDeviceSynchronize());
    return 0;
}
