// A transpose through a flattened 32x32 tile: written along rows, read down the columns
// (tile[tx * 32 + ty]): the threads of a warp read 32 elements apart, all in one bank.
#define TILE 32
// @cuda-agent sizes n=1024 verify n=64,96
// @cuda-agent launch grid=(n / 32, n / 32) block=(32, 32)
// @cuda-agent arg in in float[n * n] uniform(-1, 1)
// @cuda-agent arg out out float[n * n]
// @cuda-agent arg n = n
// @cuda-agent require n % 32 == 0
__global__ void transpose_flat(const float* in, float* out, int n) {
    __shared__ float tile[TILE * TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int x = blockIdx.x * TILE + tx, y = blockIdx.y * TILE + ty;
    tile[ty * TILE + tx] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * TILE + tx;
    y = blockIdx.x * TILE + ty;
    out[y * n + x] = tile[tx * TILE + ty];
}
