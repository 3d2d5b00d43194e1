/*
 * Separable convolution, row pass (in the style of the CUDA samples' convolutionSeparable):
 * the filter lives in constant memory, filled by cudaMemcpyToSymbol.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>

#define KERNEL_RADIUS 8
#define KERNEL_LENGTH (2 * KERNEL_RADIUS + 1)

#define ROWS_BLOCKDIM_X 16
#define ROWS_BLOCKDIM_Y 4

__constant__ float c_Kernel[KERNEL_LENGTH];

void setConvolutionKernel(float *h_Kernel) {
  cudaMemcpyToSymbol(c_Kernel, h_Kernel, KERNEL_LENGTH * sizeof(float));
}

__global__ void convolutionRowsKernel(float *d_Dst, float *d_Src, int imageW, int imageH,
                                      int pitch) {
  const int x = blockIdx.x * ROWS_BLOCKDIM_X + threadIdx.x;
  const int y = blockIdx.y * ROWS_BLOCKDIM_Y + threadIdx.y;
  if (x >= imageW || y >= imageH) return;
  float sum = 0;
#pragma unroll
  for (int j = -KERNEL_RADIUS; j <= KERNEL_RADIUS; j++) {
    int xj = min(max(x + j, 0), imageW - 1);
    sum += c_Kernel[KERNEL_RADIUS - j] * d_Src[y * pitch + xj];
  }
  d_Dst[y * pitch + x] = sum;
}

void convolutionRowsGPU(float *d_Dst, float *d_Src, int imageW, int imageH) {
  assert(imageW % ROWS_BLOCKDIM_X == 0);
  assert(imageH % ROWS_BLOCKDIM_Y == 0);
  dim3 blocks(imageW / ROWS_BLOCKDIM_X, imageH / ROWS_BLOCKDIM_Y);
  dim3 threads(ROWS_BLOCKDIM_X, ROWS_BLOCKDIM_Y);
  convolutionRowsKernel<<<blocks, threads>>>(d_Dst, d_Src, imageW, imageH, imageW);
}

int main(int argc, char **argv) {
  float *h_Kernel, *d_Input, *d_Output;
  const int imageW = 3072;
  const int imageH = 3072;

  h_Kernel = (float *)malloc(KERNEL_LENGTH * sizeof(float));
  for (unsigned int i = 0; i < KERNEL_LENGTH; i++) {
    h_Kernel[i] = (float)(rand() % 16);
  }
  cudaMalloc((void **)&d_Input, imageW * imageH * sizeof(float));
  cudaMalloc((void **)&d_Output, imageW * imageH * sizeof(float));
  setConvolutionKernel(h_Kernel);
  convolutionRowsGPU(d_Output, d_Input, imageW, imageH);
  cudaDeviceSynchronize();
  return 0;
}
