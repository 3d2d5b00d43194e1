// Row softmax launched as a single block: each thread loops over rows r = threadIdx.x, += blockDim.x.
// @cuda-agent sizes rows=4096 cols=256 verify rows=5,300 cols=7,100
// @cuda-agent launch grid=1 block=256
// @cuda-agent arg x in float[rows * cols] uniform(-5, 5)
// @cuda-agent arg y out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-6 rtol=1e-4
__global__ void softmax_one_block(const float* x, float* y, int rows, int cols) {
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        float m = x[r * cols];
        for (int j = 1; j < cols; ++j) m = fmaxf(m, x[r * cols + j]);
        float sum = 0.0f;
        for (int j = 0; j < cols; ++j) sum += expf(x[r * cols + j] - m);
        for (int j = 0; j < cols; ++j) y[r * cols + j] = expf(x[r * cols + j] - m) / sum;
    }
}
