// Logistic sigmoid, one element per thread.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n] uniform(-8, 8)
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-5 rtol=1e-4
__global__ void sigmoid(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    y[i] = 1.0f / (1.0f + expf(-x[i]));
}
