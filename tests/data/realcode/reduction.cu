// Parallel reduction (in the style of the CUDA samples' reduction kernel 4): a template over the
// element type and the block size, launched with <float, 256> and dynamic shared memory.
#include <stdio.h>
#include <cuda_runtime.h>

template <class T, unsigned int blockSize>
__global__ void reduce4(const T *g_idata, T *g_odata, unsigned int n) {
  extern __shared__ unsigned char smem_raw[];
  T *sdata = reinterpret_cast<T *>(smem_raw);
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * (blockSize * 2) + threadIdx.x;
  T mySum = (i < n) ? g_idata[i] : 0;
  if (i + blockSize < n) mySum += g_idata[i + blockSize];
  sdata[tid] = mySum;
  __syncthreads();
  for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
    if (tid < s) sdata[tid] = mySum = mySum + sdata[tid + s];
    __syncthreads();
  }
  if (tid < 32) {
    if (blockSize >= 64) mySum += sdata[tid + 32];
    for (int offset = 32 / 2; offset > 0; offset /= 2) {
      mySum += __shfl_down_sync(0xffffffff, mySum, offset);
    }
  }
  if (tid == 0) g_odata[blockIdx.x] = mySum;
}

int main(int argc, char **argv) {
  int size = 1 << 24;
  int maxThreads = 256;
  int threads = (size < maxThreads * 2) ? size / 2 : maxThreads;
  int blocks = (size + (threads * 2 - 1)) / (threads * 2);
  int smemSize = threads * sizeof(float);

  float *d_idata = NULL;
  float *d_odata = NULL;
  cudaMalloc((void **)&d_idata, size * sizeof(float));
  cudaMalloc((void **)&d_odata, blocks * sizeof(float));

  reduce4<float, 256><<<blocks, threads, smemSize>>>(d_idata, d_odata, size);
  cudaDeviceSynchronize();
  return 0;
}
