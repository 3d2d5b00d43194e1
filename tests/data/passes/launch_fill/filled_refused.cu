// refused: the spec's grid is not a constant
// @cuda-agent sizes rows=50 cols=8 verify rows=9,50 cols=8,8
// @cuda-agent launch grid=cdiv(rows, block) block=128
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void rowsum_filled(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float t = 0.0f;
    for (int c = 0; c < cols; ++c) t += x[r * cols + c];
    y[r] = t;
}
