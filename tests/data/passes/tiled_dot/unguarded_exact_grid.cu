// origin: PacktPublishing/Learn-CUDA-Programming
// path: Chapter07/07_parallel_programming_pattern/01_sgemm_optimization/sgemm.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// No guard: the launch (n / 16 blocks of 16) covers M x N exactly, which the spec checks at every size.
// @cuda-agent sizes n=2048 verify n=32,96
// @cuda-agent launch grid=(n / 16, n / 16) block=(16, 16)
// @cuda-agent arg A in float[n * n] uniform(-1, 1)
// @cuda-agent arg B in float[n * n] uniform(-1, 1)
// @cuda-agent arg C inout float[n * n] uniform(-1, 1)
// @cuda-agent arg M = n
// @cuda-agent arg N = n
// @cuda-agent arg K = n
// @cuda-agent arg alpha = 2.0
// @cuda-agent arg beta = 1.0
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__ void sgemm_kernel(const float *A, const float *B, float *C, int M, int N, int K, float alpha, float beta)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;

    float element_c = 0.f;
    for (int e = 0; e < K; e++)
        element_c += A[row * K + e] * B[e * K + col];

    C[row * N + col] = alpha * element_c + beta * C[row * N + col];
}
