// repository: NVIDIA-developer-blog/code-samples
// path: series/cuda-cpp/transpose/transpose.cu (transposeNaive)
// commit: 72d62ec464442786a36754508bcb1094d197d6a5
// license: BSD-3-Clause (Copyright (c) 1993-2015, NVIDIA CORPORATION)
// The matrix's width is read from the grid; each thread copies TILE_DIM / BLOCK_ROWS elements.
const int TILE_DIM = 32;
const int BLOCK_ROWS = 8;

// @cuda-agent sizes n=1024 verify n=96 verify n=160
// @cuda-agent launch grid=(n / TILE_DIM, n / TILE_DIM) block=(TILE_DIM, BLOCK_ROWS)
// @cuda-agent arg odata out float[n * n]
// @cuda-agent arg idata in float[n * n] uniform(-1, 1)
__global__ void transposeNaive(float *odata, const float *idata)
{
  int x = blockIdx.x * TILE_DIM + threadIdx.x;
  int y = blockIdx.y * TILE_DIM + threadIdx.y;
  int width = gridDim.x * TILE_DIM;

  for (int j = 0; j < TILE_DIM; j+= BLOCK_ROWS)
    odata[x*width + (y+j)] = idata[(y+j)*width + x];
}
