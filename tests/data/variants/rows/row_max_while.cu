// Row maxima with a while loop over the columns.
// @cuda-agent sizes rows=8192 cols=1024 verify rows=7,40 cols=3,129
// @cuda-agent launch grid=cdiv(rows, block) block=256
// @cuda-agent arg x in float[rows * cols] uniform(-10, 10)
// @cuda-agent arg y out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void row_max(const float* x, float* y, int rows, int cols) {
    int row = threadIdx.x + blockIdx.x * blockDim.x;
    if (row >= rows) {
        return;
    }
    float best = -INFINITY;
    int c = 0;
    while (c < cols) {
        best = fmaxf(best, x[(size_t)row * cols + c]);
        c++;
    }
    y[row] = best;
}
