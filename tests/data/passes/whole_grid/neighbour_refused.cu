// refused: a stream is also accessed at another index
// A difference of neighbours: x is read at i and at i + 1.
// @cuda-agent sizes n=1<<12 verify n=512,1024
// @cuda-agent launch grid=n / block - 1 block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
__global__ void diff(const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = x[i + 1] - x[i];
}
