// refused: both sides are contiguous along threadIdx.x already
// NVIDIA's copy kernel, the transpose's reference: nothing to tile.
const int TILE_DIM = 32;
const int BLOCK_ROWS = 8;
// @cuda-agent sizes n=1024 verify n=96
// @cuda-agent launch grid=(n / TILE_DIM, n / TILE_DIM) block=(TILE_DIM, BLOCK_ROWS)
// @cuda-agent arg odata out float[n * n]
// @cuda-agent arg idata in float[n * n] uniform(-1, 1)
__global__ void copy(float *odata, const float *idata)
{
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  int width = gridDim.x * TILE_DIM;

  for (int j = 0; j < TILE_DIM; j+= BLOCK_ROWS)
    odata[(y+j)*width + x] = idata[(y+j)*width + x];
}
