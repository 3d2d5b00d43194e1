// refused: is carried from one row to the next
// A running total across rows: each row's result depends on the previous rows.
// @cuda-agent sizes rows=50 cols=8 verify rows=9,50 cols=8,8
// @cuda-agent launch grid=1 block=1
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void running(const float* x, float* y, int rows, int cols) {
    float total = 0.0f;
    for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) total += x[r * cols + c];
        y[r] = total;
    }
}
