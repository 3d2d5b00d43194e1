// ReLU as a template over the element type, instantiated for float.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent template float
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg in in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[n]
// @cuda-agent arg n = n
template <typename T>
__global__ void relu_kernel(const T* in, T* out, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] > T(0) ? in[i] : T(0);
}
