// y = alpha * x + y, one element per thread.
// @cuda-agent sizes n=1<<25 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg alpha = 1.5
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y inout float[n] uniform(-1, 1)
// @cuda-agent arg n = n
__global__ void saxpy(float alpha, const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = alpha * x[i] + y[i];
    }
}
