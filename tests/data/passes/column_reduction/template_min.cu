// Column minimum (fmin) as a template over the element type, started from row 0, the loop over `r <= rows - 1`.
// @cuda-agent sizes rows=90 cols=70 verify rows=4,90 cols=31,70
// @cuda-agent launch grid=cdiv(cols, block) block=128
// @cuda-agent template double
// @cuda-agent arg x in double[rows * cols] uniform(-3, 3)
// @cuda-agent arg out out double[cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
template <typename T>
__global__ void column_min(const T* x, T* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) {
        T m = x[c];
        for (int r = 1; r <= rows - 1; ++r) m = fmin(m, x[r * cols + c]);
        out[c] = m;
    }
}
