// cuda-agent corpus: elementwise
// repository: BVLC/caffe
// path: src/caffe/layers/bias_layer.cu
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
// @cuda-agent sizes b=128 c=96 hw=55*55 verify b=2,3 c=5,7 hw=97,31
// @cuda-agent launch grid=cdiv(b * c * hw, block) block=512
// @cuda-agent arg n = b * c * hw
// @cuda-agent arg in in float[b * c * hw]
// @cuda-agent arg bias in float[c]
// @cuda-agent arg bias_dim = c
// @cuda-agent arg inner_dim = hw
// @cuda-agent arg out out float[b * c * hw]
template <typename Dtype>
__global__ void BiasForward(const int n, const Dtype* in,
    const Dtype* bias, const int bias_dim, const int inner_dim,
    Dtype* out) {
  CUDA_KERNEL_LOOP(index, n) {
    const int bias_index = (index / inner_dim) % bias_dim;
    out[index] = in[index] + bias[bias_index];
  }
}
