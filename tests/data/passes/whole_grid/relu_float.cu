// ReLU over grid x block floats, the index in the other operand order.
// @cuda-agent sizes n=1<<20 verify n=768,2560
// @cuda-agent launch grid=n / block block=256
// @cuda-agent require n % 256 == 0
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
__global__ void relu(const float* x, float* y) {
    int idx = threadIdx.x + blockDim.x * blockIdx.x;
    y[idx] = fmaxf(x[idx], 0.0f);
}
