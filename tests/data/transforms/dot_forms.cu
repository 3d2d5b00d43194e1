// C = A^T @ B with A stored k-major (A[k * M + row]), 64-bit index arithmetic, the global indices
// written index-first, the accumulator updated as `acc = acc + ...` and written through an
// early return: the tiled dot product substitutes this layout, it does not assume row-major.
// @cuda-agent sizes m=70 n=37 k=19 verify m=70,5 n=37,130 k=19,1
// @cuda-agent launch grid=(cdiv(n, block_x), cdiv(m, block_y)) block=(16, 16)
// @cuda-agent arg A in float[k * m] uniform(-1, 1)
// @cuda-agent arg B in float[k * n] uniform(-1, 1)
// @cuda-agent arg C out float[m * n]
// @cuda-agent arg M = m
// @cuda-agent arg N = n
// @cuda-agent arg K = k
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void matmul_tn(const float* A, const float* B, float* C, int M, int N, int K) {
    const int col = threadIdx.x + blockDim.x * blockIdx.x;
    const int row = threadIdx.y + blockIdx.y * blockDim.y;
    if (M <= row || col >= N) return;
    float acc = 0.0f;
    for (int p = 0; p < K; p++) acc = acc + A[(size_t)p * M + row] * B[(size_t)p * N + col];
    C[(size_t)row * N + col] = acc;
}
