// A loop over the thread's own element only (its pack's registers): x^4 by repeated products.
// @cuda-agent sizes n=1<<12 verify n=512,1024
// @cuda-agent launch grid=n / block block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
__global__ void powers(const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float p = 1.0f;
    for (int k = 0; k < 4; ++k) p *= x[i];
    y[i] = p;
}
