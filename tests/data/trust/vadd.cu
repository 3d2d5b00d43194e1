// c = a + b over 2^24 floats, one element per thread.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg a in float[n] uniform(-1, 1)
// @cuda-agent arg b in float[n] uniform(-1, 1)
// @cuda-agent arg c out float[n]
__global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
