// refused: is not at an offset of the thread
// @cuda-agent sizes n=1000 verify n=13,1000
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
__global__ void mirror(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[n - 1 - i];
}
