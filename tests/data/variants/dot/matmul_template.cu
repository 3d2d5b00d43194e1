// C = A B as a template over the element type (instantiated for float).
// @cuda-agent sizes M=1024 N=1024 K=1024 verify M=17,64 N=33,64 K=9,64
// @cuda-agent template float
// @cuda-agent launch grid=(cdiv(N, block_x), cdiv(M, block_y)) block=(16, 16)
// @cuda-agent arg A in float[M * K] uniform(-1, 1)
// @cuda-agent arg B in float[K * N] uniform(-1, 1)
// @cuda-agent arg C out float[M * N]
// @cuda-agent arg M = M
// @cuda-agent arg N = N
// @cuda-agent arg K = K
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
template <typename T>
__global__ void matmul_t(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, int M, int N, int K) {
    const int col = threadIdx.x + blockIdx.x * blockDim.x;
    const int row = threadIdx.y + blockIdx.y * blockDim.y;
    if (row < M && col < N) {
        T acc = T(0);
        for (int k = 0; k < K; ++k) acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
}
