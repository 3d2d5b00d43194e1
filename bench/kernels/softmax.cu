// Row softmax, one thread per row: three passes over the row (max, sum of exponentials, write).
// @cuda-agent sizes rows=16384 cols=512 verify rows=5,33 cols=7,100
// @cuda-agent launch grid=cdiv(rows, block) block=128
// @cuda-agent arg x in float[rows * cols] uniform(-5, 5)
// @cuda-agent arg y out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-6 rtol=1e-4
__global__ void softmax(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* in = x + (size_t)r * cols;
    float* out = y + (size_t)r * cols;
    float m = in[0];
    for (int j = 1; j < cols; ++j) m = fmaxf(m, in[j]);
    float sum = 0.0f;
    for (int j = 0; j < cols; ++j) sum += expf(in[j] - m);
    for (int j = 0; j < cols; ++j) out[j] = expf(in[j] - m) / sum;
}
