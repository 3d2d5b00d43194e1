// refused: the scan loop does not add into
// A running maximum (a max-scan), not a sum.
// @cuda-agent sizes n=1000 verify n=100,1000
// @cuda-agent launch grid=cdiv(n, 128) block=128
// @cuda-agent arg in in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[n]
// @cuda-agent arg n = n
__global__ void max_scan(const float* in, float* out, int n) {
    __shared__ float buf[128];
    int i = blockIdx.x * 128 + threadIdx.x;
    buf[threadIdx.x] = i < n ? in[i] : -1e30f;
    __syncthreads();
    for (int offset = 1; offset < 128; offset <<= 1) {
        float other = threadIdx.x >= offset ? buf[threadIdx.x - offset] : -1e30f;
        __syncthreads();
        buf[threadIdx.x] = fmaxf(buf[threadIdx.x], other);
        __syncthreads();
    }
    if (i < n) out[i] = buf[threadIdx.x];
}
