// cuda-agent corpus: convolution
// repository: zjin-lcf/HeCBench
// path: src/maxpool3d-cuda/main.cu
// commit: f27000a5188f8ac79bd43fc95a1b3f890c18823d
// license: BSD-3-Clause
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <chrono>
#include <cuda.h>

typedef float DTYPE;

// @cuda-agent sizes w=2048 h=2048 c=96 verify w=66,38 h=34,18 c=3,5
// @cuda-agent launch grid=(cdiv(w / 2, 8), cdiv(h / 2, 8), cdiv(c, 4)) block=(8, 8, 4)
// @cuda-agent arg i_img in float[c * h * w] uniform(0, 1)
// @cuda-agent arg o_img out float[c * (h / 2) * (w / 2)]
// @cuda-agent arg Hstride = 2
// @cuda-agent arg Vstride = 2
// @cuda-agent arg pool_width = 2
// @cuda-agent arg pool_height = 2
// @cuda-agent arg i_img_count = c
// @cuda-agent arg i_img_width = w
// @cuda-agent arg i_img_height = h
// @cuda-agent arg o_img_width = w / 2
// @cuda-agent arg o_img_height = h / 2
__global__ void
maxpool3d(
  const DTYPE* i_img,
        DTYPE* o_img,
  const int Hstride,
  const int Vstride,
  const int pool_width,
  const int pool_height,
  const int i_img_count,
  const int i_img_width,
  const int i_img_height,
  const int o_img_width,
  const int o_img_height )
{
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  const int z = blockIdx.z * blockDim.z + threadIdx.z;
  if (x >= o_img_width || y >= o_img_height || z >= i_img_count)
    return;

  const int xidx = Hstride * x;
  const int yidx = Vstride * y;
  DTYPE maxval = (DTYPE)0;

  for (int r = 0; r < pool_height; r++) 
  { 
    const int idxIntmp = ((z * i_img_height + yidx + r) * i_img_width) + xidx;
    for(int c = 0; c < pool_width; c++)
    {
      const int idxIn = idxIntmp + c;
      maxval = fmaxf(maxval, i_img[idxIn]);
    }
  }
  o_img[(((z * o_img_height) + y) * o_img_width) + x] = maxval;
}
