// Transpose of a rows x cols sub-matrix with leading dimensions, early return, the guard reversed.
// @cuda-agent sizes rows=40 cols=50 verify rows=7,40 cols=9,50
// @cuda-agent launch grid=(cdiv(cols, block_x), cdiv(rows, block_y)) block=(32, 8)
// @cuda-agent arg a in float[rows * (cols + 3)] uniform(-1, 1)
// @cuda-agent arg t out float[cols * (rows + 1)]
// @cuda-agent compare t written
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent arg lda = cols + 3
// @cuda-agent arg ldt = rows + 1
__global__ void transpose_ld(const float* a, float* t, int rows, int cols, int lda, int ldt) {
    const int c = threadIdx.x + blockDim.x * blockIdx.x;
    const int r = threadIdx.y + blockDim.y * blockIdx.y;
    if (cols <= c || rows <= r) return;
    t[c * ldt + r] = a[r * lda + c];
}
