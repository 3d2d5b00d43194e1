// Column maximum over a typedef'd type with fmaxf, through a row pointer.
typedef float real_t;
// @cuda-agent sizes rows=200 cols=77 verify rows=3,200 cols=33,77
// @cuda-agent launch grid=cdiv(cols, block) block=64
// @cuda-agent arg a in float[rows * cols] uniform(-5, 5)
// @cuda-agent arg out out float[cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void column_max(const real_t* a, real_t* out, int rows, int cols) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= cols) return;
    real_t m = -1e30f;
    for (int r = 0; r < rows; r++) m = fmaxf(m, a[r * cols + col]);
    out[col] = m;
}
