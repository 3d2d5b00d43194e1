// C = A * B, one output element per thread, straight from global memory.
// @cuda-agent sizes m=2048 n=2048 k=2048 verify m=17,64 n=33,64 k=9,64
// @cuda-agent launch grid=(cdiv(n, block_x), cdiv(m, block_y)) block=(16, 16)
// @cuda-agent arg A in float[m * k] uniform(-1, 1)
// @cuda-agent arg B in float[k * n] uniform(-1, 1)
// @cuda-agent arg C out float[m * n]
// @cuda-agent arg m = m
// @cuda-agent arg n = n
// @cuda-agent arg k = k
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
// @cuda-agent work flops=2*m*n*k
__global__ void matmul(const float* A, const float* B, float* C, int m, int n, int k) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < m && col < n) {
        float acc = 0.0f;
        for (int p = 0; p < k; ++p) acc += A[row * k + p] * B[p * n + col];
        C[row * n + col] = acc;
    }
}
