// Transpose with the element type behind a `using` alias and an early return.
using elem_t = float;
// @cuda-agent sizes rows=4096 cols=2048 verify rows=31,100 cols=33,70
// @cuda-agent launch grid=(cdiv(cols, block_x), cdiv(rows, block_y)) block=(16, 16)
// @cuda-agent arg src in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg dst out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void transpose_alias(const elem_t* __restrict__ src, elem_t* __restrict__ dst, int rows, int cols) {
    const unsigned col = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= rows || col >= cols) return;
    dst[(size_t)col * rows + row] = src[(size_t)row * cols + col];
}
