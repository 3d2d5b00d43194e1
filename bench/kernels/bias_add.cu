// Broadcast: add a per-column bias to every row of a row-major matrix.
// @cuda-agent sizes rows=8192 cols=2048 verify rows=3,17 cols=5,130
// @cuda-agent launch grid=cdiv(rows * cols, block) block=256
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg bias in float[cols] uniform(-1, 1)
// @cuda-agent arg out out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void bias_add(const float* x, const float* bias, float* out, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        out[i] = x[i] + bias[i % cols];
    }
}
