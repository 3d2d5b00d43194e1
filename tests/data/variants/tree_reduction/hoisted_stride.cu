// Block sum with the stride declared at the top (C89 style) and `s = s >> 1`.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg sums out float[cdiv(n, 256)]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void sum_blocks(const float* x, float* sums, int n) {
    __shared__ float cache[256];
    int tid, gid, s;
    tid = threadIdx.x;
    gid = blockIdx.x * blockDim.x + tid;
    cache[tid] = gid < n ? x[gid] : 0.0f;
    __syncthreads();
    for (s = blockDim.x / 2; s > 0; s = s >> 1) {
        if (s > tid) cache[tid] = cache[tid] + cache[s + tid];
        __syncthreads();
    }
    if (tid == 0) sums[blockIdx.x] = cache[0];
}
