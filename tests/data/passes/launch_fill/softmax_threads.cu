// Row softmax on one block of threads striding over the rows; the row's pointers are locals.
// @cuda-agent sizes rows=300 cols=100 verify rows=5,300 cols=7,100
// @cuda-agent launch grid=1 block=128
// @cuda-agent arg x in float[rows * cols] uniform(-5, 5)
// @cuda-agent arg y out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-6 rtol=1e-4
__global__ void softmax_block(const float* x, float* y, int rows, int cols) {
    for (int row = threadIdx.x; row < rows; row += blockDim.x) {
        const float* in = x + (size_t)row * cols;
        float* out = y + (size_t)row * cols;
        float mx = -INFINITY;
        for (int j = 0; j < cols; j++) mx = fmaxf(mx, in[j]);
        float s = 0.0f;
        for (int j = 0; j < cols; j++) s += expf(in[j] - mx);
        for (int j = 0; j < cols; j++) out[j] = expf(in[j] - mx) / s;
    }
}
