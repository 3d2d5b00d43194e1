// Inclusive scan of each 256-element block (Hillis-Steele in shared memory).
// @cuda-agent sizes n=1<<28 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg in in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[n]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void block_scan(const float* in, float* out, int n) {
    __shared__ float buf[256];
    int tid = threadIdx.x;
    int i = blockIdx.x * 256 + tid;
    buf[tid] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int offset = 1; offset < 256; offset <<= 1) {
        float add = tid >= offset ? buf[tid - offset] : 0.0f;
        __syncthreads();
        buf[tid] += add;
        __syncthreads();
    }
    if (i < n) out[i] = buf[tid];
}
