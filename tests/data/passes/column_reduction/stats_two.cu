// Column sum and sum of squares together (two reductions), the minimum by compare-and-keep.
// @cuda-agent sizes rows=129 cols=70 verify rows=2,129 cols=40,70
// @cuda-agent launch grid=cdiv(cols, block) block=32
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg mean out float[cols]
// @cuda-agent arg var out float[cols]
// @cuda-agent arg lo out float[cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-5 rtol=1e-4
__global__ void column_stats(const float* x, float* mean, float* var, float* lo, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f, q = 0.0f, m = 1e30f;
    for (int r = 0; r < rows; ++r) {
        float v = x[r * cols + c];
        s += v;
        q += v * v;
        if (v < m) m = v;
    }
    float mu = s / rows;
    mean[c] = mu;
    var[c] = q / rows - mu * mu;
    lo[c] = m;
}
