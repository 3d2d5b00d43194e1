// origin: jay-z20/Cuda, reduction_kernel.cu, commit 913c2cff2fab94399af68867ac16af540d2ff7e9
// license: BSD-3-Clause (NVIDIA CORPORATION, the file's header); the kernel and its helper as upstream wrote them
// The CUDA samples' reduce0 as copied into a course repository: a templated kernel whose shared
// array comes through the SharedMemory<T> wrapper, barriers as cg::sync(cta).
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

template <class T>
struct SharedMemory {
  __device__ inline operator T *() {
    extern __shared__ int __smem[];
    return (T *)__smem;
  }

  __device__ inline operator const T *() const {
    extern __shared__ int __smem[];
    return (T *)__smem;
  }
};

// @cuda-agent sizes n=1<<22 verify n=1000,4097
// @cuda-agent template float
// @cuda-agent launch grid=cdiv(n, 256) block=256 smem=256*4
// @cuda-agent arg g_idata in float[n] uniform(-1, 1)
// @cuda-agent arg g_odata out float[cdiv(n, 256)]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
template <class T>
__global__ void reduce0(T *g_idata, T *g_odata, unsigned int n) {
  // Handle to thread block group
  cg::thread_block cta = cg::this_thread_block();
  T *sdata = SharedMemory<T>();

  // load shared mem
  unsigned int tid = threadIdx.x;
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;

  sdata[tid] = (i < n) ? g_idata[i] : 0;

  cg::sync(cta);

  // do reduction in shared mem
  for (unsigned int s = 1; s < blockDim.x; s *= 2) {
    // modulo arithmetic is slow!
    if ((tid % (2 * s)) == 0) {
      sdata[tid] += sdata[tid + s];
    }

    cg::sync(cta);
  }

  // write result for this block to global mem
  if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
