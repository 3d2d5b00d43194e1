// Naive matrix transpose (in the style of NVIDIA's "efficient matrix transpose" post): the
// matrix width is read from the grid, tile sizes are file-scope constants the kernel uses.
#include <stdio.h>
#include <cuda_runtime.h>

const int TILE_DIM = 32;
const int BLOCK_ROWS = 8;

__global__ void transposeNaive(float *odata, const float *idata) {
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  int width = gridDim.x * TILE_DIM;

  for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
    odata[x * width + (y + j)] = idata[(y + j) * width + x];
}

int main(int argc, char **argv) {
  const int nx = 2048;
  const int ny = 2048;
  const int mem_size = nx * ny * sizeof(float);

  if (nx % TILE_DIM || ny % TILE_DIM) {
    printf("nx and ny must be a multiple of TILE_DIM\n");
    return 1;
  }

  dim3 dimGrid(nx / TILE_DIM, ny / TILE_DIM, 1);
  dim3 dimBlock(TILE_DIM, BLOCK_ROWS, 1);

  float *d_idata, *d_tdata;
  cudaMalloc(&d_idata, mem_size);
  cudaMalloc(&d_tdata, mem_size);

  transposeNaive<<<dimGrid, dimBlock>>>(d_tdata, d_idata);
  cudaDeviceSynchronize();
  return 0;
}
