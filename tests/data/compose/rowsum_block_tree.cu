// composes: StridedRowVectors + WarpReduction
// Row sums, a block of 256 threads per row striding over it, then a shared-memory tree: the
// threads' strides become 16-byte vectors, then the tree's last warp becomes shuffles.
// @cuda-agent sizes rows=4096 cols=4096 verify rows=3,9 cols=101,1003
// @cuda-agent launch grid=rows block=256
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg out out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void rowsum(const float* x, float* out, int rows, int cols) {
    __shared__ float part[256];
    const float* row = x + (size_t)blockIdx.x * cols;
    float acc = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) acc += row[j];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = part[0];
}
