// composes: LaunchFill + RowParallel
// Rows scaled to unit L2 norm by one block of threads striding over them (an under-filled
// launch): a thread per row first, then a warp per row with 16-byte vectors and shuffles.
// @cuda-agent sizes rows=2048 cols=1024 verify rows=7,300 cols=5,130
// @cuda-agent launch grid=1 block=256
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-6 rtol=1e-4
__global__ void rownorm(const float* x, float* y, int rows, int cols) {
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        float ss = 0.0f;
        for (int c = 0; c < cols; ++c) {
            float v = x[(size_t)r * cols + c];
            ss += v * v;
        }
        const float inv = rsqrtf(ss + 1e-12f);
        for (int c = 0; c < cols; ++c) {
            y[(size_t)r * cols + c] = x[(size_t)r * cols + c] * inv;
        }
    }
}
