// One element per thread of a square 16 x 16 block, the bounds checked by an early return: the
// block's own tile goes through shared memory, the launch unchanged.
// @cuda-agent sizes rows=3000 cols=2000 verify rows=37 cols=53 verify rows=5 cols=70
// @cuda-agent launch grid=(cdiv(cols, 16), cdiv(rows, 16)) block=(16, 16)
// @cuda-agent arg in in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg out out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void transpose_early(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) return;
    out[c * rows + r] = in[r * cols + c];
}
