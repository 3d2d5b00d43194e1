// cuda-agent corpus: elementwise
// repository: BVLC/caffe
// path: src/caffe/util/math_functions.cu
// commit: 9b891540183ddc834a02b2bd81b31afae71b2153
// license: BSD-2-Clause
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection and the lines between `// added` and `// end added`.
// added
#include <cfloat>
// from include/caffe/util/device_alternate.hpp (same repository and commit):
#define CUDA_KERNEL_LOOP(i, n) \
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; \
       i < (n); \
       i += blockDim.x * gridDim.x)
// end added

// @cuda-agent template float
// @cuda-agent sizes n=128*96*55*55 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=512
// @cuda-agent arg n = n
// @cuda-agent arg a in float[n] uniform(0.1, 2)
// @cuda-agent arg alpha = 0.75
// @cuda-agent arg y out float[n]
template <typename Dtype>
__global__ void powx_kernel(const int n, const Dtype* a,
    const Dtype alpha, Dtype* y) {
  CUDA_KERNEL_LOOP(index, n) {
    y[index] = pow(a[index], alpha);
  }
}
