// C = A B with the element type behind a typedef and the bounds check wrapping the body.
typedef float real;
// @cuda-agent sizes M=1024 N=1024 K=1024 verify M=17,64 N=33,64 K=9,64
// @cuda-agent launch grid=(cdiv(N, block_x), cdiv(M, block_y)) block=(16, 16)
// @cuda-agent arg A in float[M * K] uniform(-1, 1)
// @cuda-agent arg B in float[K * N] uniform(-1, 1)
// @cuda-agent arg C out float[M * N]
// @cuda-agent arg M = M
// @cuda-agent arg N = N
// @cuda-agent arg K = K
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__ void matmul_real(const real* A, const real* B, real* C, int M, int N, int K) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        real sum = 0;
        for (int k = 0; k < K; k++) {
            sum += A[row * K + k] * B[k * N + col];
        }
        C[row * N + col] = sum;
    }
}
