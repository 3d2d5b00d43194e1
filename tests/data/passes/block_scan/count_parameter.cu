// Inclusive scan of each block's elements, the loop bounded by a parameter: `len`, the block's
// element count (one per thread), is 128 wherever the spec calls the kernel, so `s < len` runs the
// loop while `s < blockDim.x`.
// @cuda-agent sizes n=4097 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 128) block=128
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
// @cuda-agent arg len = 128
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void scan_len(const float* x, float* y, int n, int len) {
    __shared__ float part[128];
    const int t = threadIdx.x;
    const int g = blockIdx.x * blockDim.x + t;
    part[t] = g < n ? x[g] : 0.0f;
    __syncthreads();
    for (int s = 1; s < len; s *= 2) {
        float v = 0.0f;
        if (t >= s) v = part[t - s];
        __syncthreads();
        part[t] = part[t] + v;
        __syncthreads();
    }
    if (g < n) y[g] = part[t];
}
