// refused: no read walks down a column
// A row sum: the loop walks along a row (RowParallel's family).
// @cuda-agent sizes rows=50 cols=45 verify rows=9,50 cols=45,45
// @cuda-agent launch grid=cdiv(rows, block) block=128
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void row_sum(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float s = 0.0f;
    for (int j = 0; j < cols; ++j) s += x[r * cols + j];
    y[r] = s;
}
