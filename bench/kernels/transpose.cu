// Matrix transpose, one element per thread: the reads are coalesced, the writes are not.
// @cuda-agent sizes rows=8192 cols=4096 verify rows=31,100 cols=33,70
// @cuda-agent launch grid=(cdiv(cols, block_x), cdiv(rows, block_y)) block=(16, 16)
// @cuda-agent arg in in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg out out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void transpose(const float* in, float* out, int rows, int cols) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < cols && y < rows) {
        out[x * rows + y] = in[y * cols + x];
    }
}
