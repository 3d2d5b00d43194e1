// Maximum of each row, one block of 256 threads per row, shared-memory tree.
// @cuda-agent sizes rows=4096 cols=4096 verify rows=3,9 cols=100,1000
// @cuda-agent launch grid=rows block=256
// @cuda-agent arg x in float[rows * cols] uniform(-10, 10)
// @cuda-agent arg out out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void row_max(const float* x, float* out, int rows, int cols) {
    __shared__ float best[256];
    int tid = threadIdx.x;
    const float* row = x + (size_t)blockIdx.x * cols;
    float m = -3.402823466e38f;
    for (int j = tid; j < cols; j += blockDim.x) m = fmaxf(m, row[j]);
    best[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) best[tid] = fmaxf(best[tid], best[tid + s]);
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = best[0];
}
