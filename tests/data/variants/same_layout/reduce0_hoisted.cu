// Interleaved tree with the stride declared before its loop and the sum written as `x = x + y`.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg sums out float[cdiv(n, 256)]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void partial_sums(const float* x, float* sums, int n) {
    __shared__ float cache[256];
    unsigned int s;
    unsigned int tid = threadIdx.x;
    unsigned int gid = blockIdx.x * blockDim.x + tid;
    cache[tid] = 0.0f;
    if (gid < n) cache[tid] = x[gid];
    __syncthreads();
    for (s = 1; s < blockDim.x; s <<= 1) {
        if (tid % (2 * s) == 0) cache[tid] = cache[tid] + cache[tid + s];
        __syncthreads();
    }
    if (tid == 0) sums[blockIdx.x] = cache[0];
}
