// Written from the output's side: the writes walk threadIdx.x, the reads are strided.
#define TILE_DIM 32
#define BLOCK_ROWS 16
// @cuda-agent sizes n=2048 verify n=64 verify n=96
// @cuda-agent launch grid=(n / TILE_DIM, n / TILE_DIM) block=(TILE_DIM, BLOCK_ROWS)
// @cuda-agent arg src in float[n * n] uniform(-1, 1)
// @cuda-agent arg dst out float[n * n]
// @cuda-agent arg n = n
__global__ void transpose_gather(const float* src, float* dst, int n) {
    const int col = blockIdx.x * TILE_DIM + threadIdx.x;
    const int row = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int r = 0; r < TILE_DIM; r += BLOCK_ROWS)
        dst[(row + r) * n + col] = src[col * n + row + r];
}
