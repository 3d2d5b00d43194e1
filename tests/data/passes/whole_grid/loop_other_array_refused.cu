// refused: a loop accesses `w[k]`
// @cuda-agent sizes n=1<<12 verify n=512,1024
// @cuda-agent launch grid=n / block block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg w in float[4] uniform(-1, 1)
// @cuda-agent arg y out float[n]
__global__ void poly4(const float* x, const float* w, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0.0f;
    for (int k = 0; k < 4; ++k) s = s * x[i] + w[k];
    y[i] = s;
}
