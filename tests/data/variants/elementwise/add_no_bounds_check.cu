// Vector add without a bounds check: the launch covers exactly n elements (n a multiple of the block).
// @cuda-agent sizes n=1<<24 verify n=1024,4096
// @cuda-agent launch grid=n / block block=256
// @cuda-agent arg a in float[n] uniform(-1, 1)
// @cuda-agent arg b in float[n] uniform(-1, 1)
// @cuda-agent arg c out float[n]
// @cuda-agent arg n = n
__global__ void vec_add(const float* a, const float* b, float* c, int n) {
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    c[i] = a[i] + b[i];
}
