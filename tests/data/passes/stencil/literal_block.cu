// A 3-point smoothing along rows with the block size written as a number (blockIdx.x * 32): the spec's block is kept.
// @cuda-agent sizes h=21 w=70 verify h=3,21 w=33,70
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y)) block=(32, 4)
// @cuda-agent arg a in float[h * w] uniform(-1, 1)
// @cuda-agent arg b out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void smooth_rows(const float* a, float* b, int h, int w) {
    int col = blockIdx.x * 32 + threadIdx.x;
    int row = blockIdx.y * 4 + threadIdx.y;
    if (row < h && col < w) {
        float left = col > 0 ? a[row * w + col - 1] : 0.0f;
        float right = col + 1 < w ? a[row * w + col + 1] : 0.0f;
        b[row * w + col] = 0.25f * left + 0.5f * a[row * w + col] + 0.25f * right;
    }
}
