// Row sums of a rows x cols fp32 matrix, two ways: one thread per row summing left to right (the
// naive form), and one block per row with strided partial sums, warp shuffles and a shared-memory
// combine of the warps (a different summation order: the results differ in the last bits).
// @cuda-agent sizes rows=4096 cols=1000 verify rows=33,7 cols=1021,3000
// @cuda-agent launch grid=cdiv(rows, block) block=256
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg out out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void rowsum(const float* x, float* out, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float s = 0.0f;
        for (int c = 0; c < cols; ++c) s += x[(size_t)r * cols + c];
        out[r] = s;
    }
}

// @cuda-agent launch grid=rows block=256 smem=(block / 32) * 4
__global__ void rowsum_block(const float* x, float* out, int rows, int cols) {
    extern __shared__ float warp_sums[];
    int r = blockIdx.x;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += x[(size_t)r * cols + c];
    for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = threadIdx.x < (blockDim.x >> 5) ? warp_sums[threadIdx.x] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) s += __shfl_down_sync(0xffffffffu, s, off);
        if (threadIdx.x == 0) out[r] = s;
    }
}
