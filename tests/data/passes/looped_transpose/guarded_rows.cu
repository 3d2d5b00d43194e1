// The same loop over a tile's rows with bounds checks, so any size works (the tail tiles are
// partly outside the matrix); tile sizes are constexprs.
constexpr int TILE = 32;
constexpr int ROWS = 8;

// @cuda-agent sizes h=1000 w=1500 verify h=37 w=53 verify h=5 w=70
// @cuda-agent launch grid=(cdiv(w, TILE), cdiv(h, TILE)) block=(TILE, ROWS)
// @cuda-agent arg in in float[h * w] uniform(-1, 1)
// @cuda-agent arg out out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void transpose_rows(const float* in, float* out, int h, int w) {
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < w && y + j < h) out[(size_t)x * h + y + j] = in[(size_t)(y + j) * w + x];
}
