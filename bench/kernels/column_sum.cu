// Sum of each column of a row-major matrix, one thread per column walking down the rows.
// @cuda-agent sizes rows=8192 cols=8192 verify rows=7,300 cols=5,97
// @cuda-agent launch grid=cdiv(cols, block) block=256
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg sums out float[cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// 8192-term fp32 sums reordered (rows split among threads) differ from the loop's by ~3e-4:
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__ void column_sum(const float* x, float* sums, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f;
    for (int r = 0; r < rows; ++r) s += x[(size_t)r * cols + c];
    sums[c] = s;
}
