// Row-wise softmax over a T x T score matrix, one block per 128 rows' tile.
#include <cuda_runtime.h>
#include <cstdlib>

#define TILE 16
#define ROWS_PER_BLOCK 128

__global__ void transpose_tiled(float* out, const float* in, int W, int H) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    if (x < W && y < H) tile[threadIdx.y][threadIdx.x] = in[y * W + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    if (x < H && y < W) out[y * H + x] = tile[threadIdx.x][threadIdx.y];
}

__global__ void softmax_rows(float* out, const float* in, int T) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= T) return;
    float m = -1e30f, s = 0.0f;
    for (int j = 0; j < T; j++) m = fmaxf(m, in[row * T + j]);
    for (int j = 0; j < T; j++) s += expf(in[row * T + j] - m);
    for (int j = 0; j < T; j++) out[row * T + j] = expf(in[row * T + j] - m) / s;
}

static int largestPow2(int n) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

int main() {
    int W = 1920, H = 1080, T = 1024;
    float *a, *b, *s, *p;
    cudaMalloc(&a, W * H * sizeof(float));
    cudaMalloc(&b, W * H * sizeof(float));
    dim3 block(TILE, TILE);
    dim3 grid((W + TILE - 1) / TILE, (H + TILE - 1) / TILE);
    transpose_tiled<<<grid, block>>>(b, a, W, H);
    cudaMalloc(&s, T * T * sizeof(float));
    cudaMalloc(&p, T * T * sizeof(float));
    int threads = largestPow2(ROWS_PER_BLOCK + 10);
    softmax_rows<<<T / threads, threads>>>(p, s, T);
    return 0;
}
