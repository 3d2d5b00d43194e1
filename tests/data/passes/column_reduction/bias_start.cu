// The sum starts from an array element read after the guard (row 0 of the threads keeps it).
// @cuda-agent sizes rows=50 cols=45 verify rows=9,50 cols=45,45
// @cuda-agent launch grid=cdiv(cols, block) block=128
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg b in float[cols] uniform(-1, 1)
// @cuda-agent arg y out float[cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void column_bias(const float* x, const float* b, float* y, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = b[c];
    for (int r = 0; r < rows; ++r) s += x[r * cols + c];
    y[c] = s;
}
