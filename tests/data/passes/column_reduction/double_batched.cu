// Column sums of a batch of matrices (blockIdx.y picks the matrix), double precision, size_t strides.
// @cuda-agent sizes b=3 rows=50 cols=45 verify b=2,3 rows=9,50 cols=45,45
// @cuda-agent launch grid=(cdiv(cols, block), b) block=256
// @cuda-agent arg x in double[b * rows * cols] uniform(-1, 1)
// @cuda-agent arg y out double[b * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void batched_colsum(const double* x, double* y, int rows, int cols) {
    size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const double* m = x + (size_t)blockIdx.y * rows * cols;
    if (c >= cols) return;
    double t = 0;
    for (int r = 0; r < rows; ++r) t = t + m[(size_t)r * cols + c];
    y[(size_t)blockIdx.y * cols + c] = t;
}
