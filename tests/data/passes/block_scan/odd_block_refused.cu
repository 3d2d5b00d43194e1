// refused: a single-buffered scan needs a constant block of a multiple of 32 threads
// @cuda-agent sizes n=1000 verify n=100,1000
// @cuda-agent launch grid=cdiv(n, 100) block=100
// @cuda-agent arg in in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[n]
// @cuda-agent arg n = n
__global__ void scan100(const float* in, float* out, int n) {
    __shared__ float buf[100];
    int i = blockIdx.x * 100 + threadIdx.x;
    buf[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int offset = 1; offset < 100; offset <<= 1) {
        float add = threadIdx.x >= offset ? buf[threadIdx.x - offset] : 0.0f;
        __syncthreads();
        buf[threadIdx.x] += add;
        __syncthreads();
    }
    if (i < n) out[i] = buf[threadIdx.x];
}
