// Inclusive prefix sum of each 1024-element row by a block of 1024 threads (Hillis-Steele in shared memory).
// @cuda-agent sizes rows=262144 verify rows=3,17
// @cuda-agent launch grid=rows block=1024
// @cuda-agent arg x in float[rows * 1024] uniform(-1, 1)
// @cuda-agent arg y out float[rows * 1024]
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__ void row_scan(const float* x, float* y) {
    __shared__ float buf[1024];
    const size_t base = (size_t)blockIdx.x * 1024;
    buf[threadIdx.x] = x[base + threadIdx.x];
    __syncthreads();
    for (int offset = 1; offset < 1024; offset *= 2) {
        float add = threadIdx.x >= offset ? buf[threadIdx.x - offset] : 0.0f;
        __syncthreads();
        buf[threadIdx.x] += add;
        __syncthreads();
    }
    y[base + threadIdx.x] = buf[threadIdx.x];
}
