// cuda-agent corpus: elementwise
// repository: zjin-lcf/HeCBench
// path: src/glu-cuda/main.cu
// commit: f27000a5188f8ac79bd43fc95a1b3f890c18823d
// license: BSD-3-Clause
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <chrono>
#include <random>
#include <vector>
#include <cuda.h>


// @cuda-agent sizes m=1024 s=512 n=1024 verify m=3,5 s=7,2 n=33,65
// @cuda-agent launch grid=cdiv(m * s * n, block) block=256
// @cuda-agent arg M = m
// @cuda-agent arg split_dim_size = s
// @cuda-agent arg N = n
// @cuda-agent arg Xdata in float[m * 2 * s * n]
// @cuda-agent arg Ydata out float[m * s * n]
__global__
void glu_kernel(
   const int M,
   const int split_dim_size,
   const int N,
   const float* Xdata,
         float* Ydata)
{
  int index = blockIdx.x * blockDim.x + threadIdx.x; 
  if (index >= M * split_dim_size * N) return;

  const int xOffset = 2 * split_dim_size * N;
  const int yOffset = split_dim_size * N;
  const int i = index / split_dim_size / N;
  const int j = index / N % split_dim_size;
  const int k = index % N;
  const float x1 = Xdata[i * xOffset + j * N + k];
  const float x2 = Xdata[i * xOffset + (j + split_dim_size) * N + k];
  Ydata[i * yOffset + j * N + k] = x1 * (1.f / (1.f + expf(-x2)));
}
