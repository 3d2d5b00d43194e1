// Row softmax, one thread per row, as tutorials write it: the flat index `int i = row * N + col;`
// is declared anew in each of the three loops.
// @cuda-agent sizes M=4096 N=512 verify M=5,37 N=7,100
// @cuda-agent launch grid=cdiv(M, block) block=128
// @cuda-agent arg input in float[M * N] uniform(-5, 5)
// @cuda-agent arg output out float[M * N]
// @cuda-agent arg M = M
// @cuda-agent arg N = N
// @cuda-agent tolerance atol=1e-6 rtol=1e-4
__global__ void softmax_kernel(const float* input, float* output, int M, int N) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M) {
        float maxval = -INFINITY;
        for (int col = 0; col < N; col++) {
            int i = row * N + col;
            maxval = fmaxf(maxval, input[i]);
        }
        float divisor = 0.0f;
        for (int col = 0; col < N; col++) {
            int i = row * N + col;
            divisor += expf(input[i] - maxval);
        }
        for (int col = 0; col < N; col++) {
            int i = row * N + col;
            output[i] = expf(input[i] - maxval) / divisor;
        }
    }
}
