// cuda-agent corpus: histogram
// repository: moocf/histogram.cuda
// path: main.cu
// commit: 6867134bb728163468ca121764d12b135d5c1759
// license: MIT
// expert: kernelShared (structural: privatised histogram in shared memory)
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection and the lines between `// added` and `// end added`.
// added
#include <cstdint>
// end added

const int threads = 256;

// @cuda-agent sizes n=1000000 verify n=1000,4097
// @cuda-agent launch grid=264 block=256
// @cuda-agent arg hist inout int[256] const(0)
// @cuda-agent arg buff in uint8_t[n] randint(0, 256)
// @cuda-agent arg N = n
__global__ void kernel(int *hist, const uint8_t *buff, int N) {
  int i = threadIdx.x + blockIdx.x * blockDim.x;

  while (i < N) {
    atomicAdd(&hist[buff[i]], 1); // 1, 2
    i += blockDim.x * gridDim.x;  // 3
  }
}

// @cuda-agent sizes n=1000000 verify n=1000,4097
// @cuda-agent launch grid=264 block=256
// @cuda-agent arg hist inout int[256] const(0)
// @cuda-agent arg buff in uint8_t[n] randint(0, 256)
// @cuda-agent arg N = n
__global__ void kernelShared(int *hist, const uint8_t *buff, int N) {
  __shared__ int temp[threads];
  int i = threadIdx.x + blockIdx.x * blockDim.x;
  int t = threadIdx.x;

  temp[t] = 0;     // 1
  __syncthreads(); // 1

  while (i < N) {
    atomicAdd(&temp[buff[i]], 1); // 2, 3
    i += blockDim.x * gridDim.x;  // 4
  }
  __syncthreads(); // 5

  atomicAdd(&hist[t], temp[t]); // 6
}
