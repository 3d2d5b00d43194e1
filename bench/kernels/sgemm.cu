// C = alpha * A @ B + beta * C, row-major, one output per thread; x walks the rows (the first naive
// SGEMM of most tutorials: neighbouring threads read A's rows and write C's columns).
// @cuda-agent sizes m=2048 n=2048 k=1024 verify m=33,100,64 n=17,70,128 k=3,21,64
// @cuda-agent launch grid=(cdiv(m, block_x), cdiv(n, block_y)) block=(32, 32)
// @cuda-agent arg M = m
// @cuda-agent arg N = n
// @cuda-agent arg K = k
// @cuda-agent arg alpha = 1.5
// @cuda-agent arg A in float[m * k] uniform(-1, 1)
// @cuda-agent arg B in float[k * n] uniform(-1, 1)
// @cuda-agent arg beta = -0.5
// @cuda-agent arg C inout float[m * n] uniform(-1, 1)
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
// @cuda-agent work flops=2*m*n*k
__global__ void sgemm_naive(int M, int N, int K, float alpha, const float* A, const float* B, float beta, float* C) {
    const unsigned int x = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < M && y < N) {
        float tmp = 0.0f;
        for (int i = 0; i < K; ++i) {
            tmp += A[x * K + i] * B[i * N + y];
        }
        C[x * N + y] = alpha * tmp + beta * C[x * N + y];
    }
}
