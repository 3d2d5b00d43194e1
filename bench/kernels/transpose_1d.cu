// Matrix transpose over a 1-D index split into row and column by `/` and `%`.
// @cuda-agent sizes N=8192 verify N=33,100
// @cuda-agent launch grid=cdiv(N * N, block) block=256
// @cuda-agent arg in in float[N * N] uniform(-1, 1)
// @cuda-agent arg out out float[N * N]
// @cuda-agent arg N = N
__global__ void transpose_1d(const float* in, float* out, int N) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N * N) {
        int row = idx / N;
        int col = idx % N;
        out[col * N + row] = in[row * N + col];
    }
}
