// A templated scale-and-shift over grid x block elements (no bounds check), the index through a second local.
// @cuda-agent sizes n=1<<20 verify n=512,1536
// @cuda-agent launch grid=n / block block=256
// @cuda-agent require n % 256 == 0
// @cuda-agent template float
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
// @cuda-agent arg s = 2.5
template <typename T>
__global__ void scale_shift(const T* x, T* y, T s) {
    const unsigned int tid = threadIdx.x;
    const unsigned int i = blockIdx.x * blockDim.x + tid;
    y[i] = x[i] * s + (T)1;
}
