// 256-bin histogram with global atomics (in the style of the CUDA samples' histogram):
// managed memory, a host vector of bytes, iDivUp and checkCudaErrors.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#define NUM_BINS 256
#define checkCudaErrors(val) check((val), #val, __FILE__, __LINE__)

void check(cudaError_t result, char const *const func, const char *const file, int const line) {
  if (result) {
    fprintf(stderr, "CUDA error at %s:%d code=%d \"%s\" \n", file, line, (int)result, func);
  }
}

inline int iDivUp(int a, int b) { return (a % b != 0) ? (a / b + 1) : (a / b); }

__global__ void histogram_atomic(const unsigned char *data, unsigned int *bins, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    atomicAdd(&bins[data[i]], 1u);
  }
}

int main() {
  const int n = 1 << 22;
  std::vector<unsigned char> h_data(n);
  for (int i = 0; i < n; i++) h_data[i] = (unsigned char)(i * 7);

  unsigned char *d_data;
  unsigned int *d_bins;
  checkCudaErrors(cudaMalloc(&d_data, h_data.size()));
  checkCudaErrors(cudaMallocManaged(&d_bins, NUM_BINS * sizeof(unsigned int)));
  checkCudaErrors(cudaMemcpy(d_data, h_data.data(), n, cudaMemcpyHostToDevice));
  checkCudaErrors(cudaMemset(d_bins, 0, NUM_BINS * sizeof(unsigned int)));

  int threads = 256;
  int blocks = iDivUp(n, threads);
  histogram_atomic<<<blocks, threads>>>(d_data, d_bins, n);
  checkCudaErrors(cudaDeviceSynchronize());
  return 0;
}
