// cuda-agent corpus: elementwise
// repository: BVLC/caffe
// path: src/caffe/layers/relu_layer.cu
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
// @cuda-agent sizes n=128*96*55*55
// @cuda-agent launch grid=cdiv(n, block) block=512
// @cuda-agent arg n = n
// @cuda-agent arg in in float[n]
// @cuda-agent arg out out float[n]
// @cuda-agent arg negative_slope = 0.01
template <typename Dtype>
__global__ void ReLUForward(const int n, const Dtype* in, Dtype* out,
    Dtype negative_slope) {
  CUDA_KERNEL_LOOP(index, n) {
    out[index] = in[index] > 0 ? in[index] : in[index] * negative_slope;
  }
}
