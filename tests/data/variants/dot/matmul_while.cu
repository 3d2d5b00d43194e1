// C = A B with a while loop over the shared dimension.
// @cuda-agent sizes M=1024 N=1024 K=1024 verify M=17,64 N=33,64 K=9,64
// @cuda-agent launch grid=(cdiv(N, block_x), cdiv(M, block_y)) block=(16, 16)
// @cuda-agent arg A in float[M * K] uniform(-1, 1)
// @cuda-agent arg B in float[K * N] uniform(-1, 1)
// @cuda-agent arg C out float[M * N]
// @cuda-agent arg M = M
// @cuda-agent arg N = N
// @cuda-agent arg K = K
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__ void matmul_while(const float* A, const float* B, float* C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        int k = 0;
        while (k < K) {
            acc += A[row * K + k] * B[k * N + col];
            ++k;
        }
        C[row * N + col] = acc;
    }
}
