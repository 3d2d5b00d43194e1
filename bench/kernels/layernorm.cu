// Layer normalisation over the last dimension, one thread per row.
// @cuda-agent sizes rows=16384 cols=768 verify rows=5,33 cols=8,100
// @cuda-agent launch grid=cdiv(rows, block) block=128
// @cuda-agent arg x in float[rows * cols] normal
// @cuda-agent arg gamma in float[cols] uniform(0.5, 1.5)
// @cuda-agent arg beta in float[cols] uniform(-0.5, 0.5)
// @cuda-agent arg y out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void layernorm(const float* x, const float* gamma, const float* beta, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* in = x + (size_t)r * cols;
    float mean = 0.0f;
    for (int j = 0; j < cols; ++j) mean += in[j];
    mean /= cols;
    float var = 0.0f;
    for (int j = 0; j < cols; ++j) var += (in[j] - mean) * (in[j] - mean);
    var /= cols;
    float inv = rsqrtf(var + 1e-5f);
    for (int j = 0; j < cols; ++j) y[(size_t)r * cols + j] = (in[j] - mean) * inv * gamma[j] + beta[j];
}
