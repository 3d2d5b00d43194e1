// Row sums of a batch of matrices, one thread per row: rows along x, the batch along blockIdx.y.
// @cuda-agent sizes b=3 rows=37 cols=45 verify b=2,3 rows=5,37 cols=3,45
// @cuda-agent launch grid=(cdiv(rows, block), b) block=64
// @cuda-agent arg x in float[b * rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[b * rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-5 rtol=1e-4
__global__ void batched_row_sum(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    const float* m = x + (size_t)blockIdx.y * rows * cols;
    if (r < rows) {
        float s = 0.0f;
        for (int j = 0; j < cols; ++j) s += m[(size_t)r * cols + j];
        y[blockIdx.y * rows + r] = s;
    }
}
