// 1-D convolution with a 7-tap mask, one thread per output.
// @cuda-agent sizes n=1000 verify n=13,1000
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg m in float[7] uniform(-1, 1)
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
__global__ void conv1d(const float* x, const float* m, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float s = 0.0f;
        int start = i - 3;
        for (int j = 0; j < 7; ++j) {
            if (start + j >= 0 && start + j < n) s += x[start + j] * m[j];
        }
        y[i] = s;
    }
}
