// Naive SGEMM (in the style of the "how to optimize a CUDA matmul" tutorials):
// C (M x N) = alpha * A (M x K) @ B (K x N) + beta * C, one thread per output element.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CEIL_DIV(M, N) (((M) + (N)-1) / (N))

__global__ void sgemm_naive(int M, int N, int K, float alpha, const float *A, const float *B,
                            float beta, float *C) {
  const unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < M && y < N) {
    float tmp = 0.0;
    for (int i = 0; i < K; ++i) {
      tmp += A[x * K + i] * B[i * N + y];
    }
    C[x * N + y] = alpha * tmp + beta * C[x * N + y];
  }
}

void run_sgemm_naive(int M, int N, int K, float alpha, float *A, float *B, float beta, float *C) {
  dim3 gridDim(CEIL_DIV(M, 32), CEIL_DIV(N, 32));
  dim3 blockDim(32, 32);
  sgemm_naive<<<gridDim, blockDim>>>(M, N, K, alpha, A, B, beta, C);
}

int main(int argc, char **argv) {
#ifdef LARGE_PROBLEM
  int M = 8192, K = 8192, N = 8192;
#else
  int M = 4096, K = 2048, N = 1024;
#endif
  float alpha = 0.5, beta = 3.0;  // GEMM input parameters, C = α*AB + β*C

  float *dA = nullptr, *dB = nullptr, *dC = nullptr;
  cudaMalloc((void **)&dA, sizeof(float) * M * K);
  cudaMalloc((void **)&dB, sizeof(float) * K * N);
  cudaMalloc((void **)&dC, sizeof(float) * M * N);

  run_sgemm_naive(M, N, K, alpha, dA, dB, beta, dC);
  cudaDeviceSynchronize();
  return 0;
}
