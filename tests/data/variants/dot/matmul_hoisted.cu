// C = A B in C89 style: the loop variable and the accumulator declared before the loop, an early return.
// @cuda-agent sizes M=1024 N=1024 K=1024 verify M=17,64 N=33,64 K=9,64
// @cuda-agent launch grid=(cdiv(N, block_x), cdiv(M, block_y)) block=(16, 16)
// @cuda-agent arg a in float[M * K] uniform(-1, 1)
// @cuda-agent arg b in float[K * N] uniform(-1, 1)
// @cuda-agent arg c out float[M * N]
// @cuda-agent arg M = M
// @cuda-agent arg N = N
// @cuda-agent arg K = K
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__ void gemm_naive(const float* a, const float* b, float* c, int M, int N, int K) {
    int i, j, p;
    float acc;
    i = blockIdx.y * blockDim.y + threadIdx.y;
    j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= M || j >= N) return;
    acc = 0.0f;
    for (p = 0; p < K; ++p) acc += a[i * K + p] * b[p * N + j];
    c[i * N + j] = acc;
}
