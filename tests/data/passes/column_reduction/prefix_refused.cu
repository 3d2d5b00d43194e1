// refused: `s` is read inside the loop
// A running column sum: every prefix is written (a scan down each column, not a reduction).
// @cuda-agent sizes rows=50 cols=45 verify rows=9,50 cols=45,45
// @cuda-agent launch grid=cdiv(cols, block) block=128
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void column_prefix(const float* x, float* y, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f;
    for (int r = 0; r < rows; ++r) {
        s += x[r * cols + c];
        y[r * cols + c] = s;
    }
}
