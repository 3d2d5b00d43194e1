// Forms of thread-per-row kernels the row-parallel pass must keep exact: a size_t row written in
// another operand order with a braced early return, an alias through &x[...], a double fmin
// starting from the first element, a loop from 1 to `<= cols - 1`, sums that start from a
// non-zero value or continue an earlier one (`-=` under a condition), a product, array writes
// outside the loops that a later loop reads back.
// @cuda-agent sizes rows=37 cols=45 verify rows=5,37 cols=3,45
// @cuda-agent launch grid=cdiv(rows, block) block=64
// @cuda-agent arg x in float[rows * cols] uniform(0.5, 1.5)
// @cuda-agent arg stats out double[rows * 2]
// @cuda-agent arg y out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-5 rtol=1e-4
__global__ void row_forms(const float* x, double* stats, float* y, int rows, int cols) {
    size_t row = (size_t)threadIdx.x + blockDim.x * (size_t)blockIdx.x;
    if (row >= rows) {
        return;
    }
    const float* in = &x[row * cols];
    double lo = in[0];
    for (int j = 1; j <= cols - 1; j++) lo = fmin(lo, (double)in[j]);
    double total = 1.0;
    for (int j = 0; j < cols; j += 1) total = total + in[j];
    total -= 0.5;
    for (int j = 0; j < cols; ++j) {
        if (in[j] > 1.0f) total -= in[j] * 0.25f;
    }
    float scale = 1.0f;
    for (int j = 0; j < cols; ++j) scale *= in[j] > 1.2f ? 1.01f : 1.0f;
    stats[2 * row] = lo;
    stats[2 * row + 1] = total;
    for (int j = 0; j < cols; ++j) y[row * cols + j] = (float)(in[j] * scale / stats[2 * row + 1]);
}
