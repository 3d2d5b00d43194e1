// cuda-agent corpus: stencil
// repository: zjin-lcf/HeCBench
// path: src/entropy-cuda/main.cu
// commit: f27000a5188f8ac79bd43fc95a1b3f890c18823d
// license: MIT
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <chrono>
#include <cuda.h>

// @cuda-agent sizes w=8192 h=8192 verify w=67,33 h=45,19
// @cuda-agent launch grid=(cdiv(w, 16), cdiv(h, 16)) block=(16, 16)
// @cuda-agent arg d_entropy out float[h * w]
// @cuda-agent arg d_val in char[h * w] randint(0, 16)
// @cuda-agent arg height = h
// @cuda-agent arg width = w
// @cuda-agent tolerance atol=1e-4
__global__ 
void entropy(
        float *__restrict__ d_entropy,
    const char*__restrict__ d_val, 
    int height, int width)
{
  const int x = threadIdx.x + blockIdx.x * blockDim.x;
  const int y = threadIdx.y + blockIdx.y * blockDim.y;
  if (y >= height || x >= width) return;

  // value of matrix element ranges from 0 inclusive to 16 exclusive
  char count[16];
  for (int i = 0; i < 16; i++) count[i] = 0;

  // total number of valid elements
  char total = 0;

  // 5x5 window
  for(int dy = -2; dy <= 2; dy++) {
    for(int dx = -2; dx <= 2; dx++) {
      int xx = x + dx;
      int yy = y + dy;
      if(xx >= 0 && yy >= 0 && yy < height && xx < width) {
        count[d_val[yy * width + xx]]++;
        total++;
      }
    }
  }

  float entropy = 0;
  if (total < 1) {
    total = 1;
  } else {
    for(int k = 0; k < 16; k++) {
      float p = __fdividef((float)count[k], (float)total);
      entropy -= p * __log2f(p);
    }
  }

  d_entropy[y * width + x] = entropy;
}
