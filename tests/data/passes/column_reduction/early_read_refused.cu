// refused: before the loop is not a declaration (one reading arrays after the guards)
// The start value is read before the bounds check (an out-of-range column would read past the end).
// @cuda-agent sizes rows=50 cols=45 verify rows=9,50 cols=45,45
// @cuda-agent launch grid=cdiv(cols, block) block=128
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg b in float[cols + 128] uniform(-1, 1)
// @cuda-agent arg y out float[cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void column_bias_early(const float* x, const float* b, float* y, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    float s = b[c];
    if (c >= cols) return;
    for (int r = 0; r < rows; ++r) s += x[r * cols + c];
    y[c] = s;
}
