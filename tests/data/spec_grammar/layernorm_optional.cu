// Row means with an optional second output: the kernel skips rstd when it is NULL.
// @cuda-agent sizes rows=4096 cols=768
// @cuda-agent launch grid=cdiv(rows, block) block=128
// @cuda-agent arg mean out float[rows]
// @cuda-agent arg rstd = NULL
// @cuda-agent arg inp in float[rows * cols]
__global__ void row_stats(float* mean, float* rstd, const float* inp, int rows, int cols)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float s = 0.0f, s2 = 0.0f;
    for (int c = 0; c < cols; c++) {
        float v = inp[r * cols + c];
        s += v;
        s2 += v * v;
    }
    float m = s / cols;
    mean[r] = m;
    if (rstd != nullptr) rstd[r] = rsqrtf(s2 / cols - m * m + 1e-5f);
}
