// refused: is compared (a bounds check
// @cuda-agent sizes n=1000 verify n=13,1000
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
__global__ void relu_bounded(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f);
}
