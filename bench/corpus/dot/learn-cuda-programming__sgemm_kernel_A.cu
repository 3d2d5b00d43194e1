// cuda-agent corpus: dot
// repository: PacktPublishing/Learn-CUDA-Programming
// path: Chapter05/05_debug_profiling/01_focused_profile/sgemm.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// expert: sgemm_kernel_v2 in learn-cuda-programming__sgemm_kernel.cu (structural: shared-memory tiles of A and B (chapter 7's version))
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <stdio.h>
#include <cuda_profiler_api.h>

#define BLOCK_DIM 16

////////////////////////////////////////////////////////////////////////////////
//! Compute reference data set matrix multiply on GPU
//! C = alpha * A * B + beta * C
//! @param A          matrix A as provided to device
//! @param B          matrix B as provided to device
//! @param C          matrix C as provided to device
//! @param N          height of matrix A and matrix C
//! @param M          width of matrix B and matrix C
//! @param K          width of matrix A and height of matrix C
//! @param alpha      scala value for matrix multiplication
//! @param beta       scala value for matrix summation with C
////////////////////////////////////////////////////////////////////////////////
// @cuda-agent sizes n=2048 verify n=32,96
// @cuda-agent launch grid=(n / 16, n / 16) block=(16, 16)
// @cuda-agent arg A in float[n * n]
// @cuda-agent arg B in float[n * n]
// @cuda-agent arg C inout float[n * n]
// @cuda-agent arg N = n
// @cuda-agent arg M = n
// @cuda-agent arg K = n
// @cuda-agent arg alpha = 2.0
// @cuda-agent arg beta = 1.0
__global__ void sgemm_kernel_A(const float *A, const float *B, float *C, int N, int M, int K, float alpha, float beta)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;

    float sum = 0.f;
    for (int i = 0; i < K; ++i) 
        sum += A[row * K + i] * B[i * K + col];

    C[row * M + col] = alpha * sum + beta * C[row * M + col];
}
