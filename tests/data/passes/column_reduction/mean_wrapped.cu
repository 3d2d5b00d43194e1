// Column means, the body wrapped in the bounds check, the sum started from a bias.
// @cuda-agent sizes n=300 d=97 verify n=7,300 d=5,97
// @cuda-agent launch grid=cdiv(d, block) block=128
// @cuda-agent arg x in float[n * d] uniform(-1, 1)
// @cuda-agent arg mean out float[d]
// @cuda-agent arg n = n
// @cuda-agent arg d = d
// @cuda-agent tolerance atol=1e-5 rtol=1e-4
__global__ void column_mean(const float* x, float* mean, int n, int d) {
    int j = threadIdx.x + blockIdx.x * blockDim.x;
    if (j < d) {
        float acc = 0.5f;
        for (int i = 0; i < n; i++) {
            acc += x[i * d + j];
        }
        mean[j] = (acc - 0.5f) / n;
    }
}
