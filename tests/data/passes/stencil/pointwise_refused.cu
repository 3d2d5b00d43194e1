// refused: is read at one position per thread: there is no neighbourhood to share
// An elementwise add: each input is read once, at the thread's own element.
// @cuda-agent sizes n=1000 verify n=13,1000
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg a in float[n] uniform(-1, 1)
// @cuda-agent arg b in float[n] uniform(-1, 1)
// @cuda-agent arg c out float[n]
// @cuda-agent arg n = n
__global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
