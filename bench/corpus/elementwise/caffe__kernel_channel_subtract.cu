// cuda-agent corpus: elementwise
// repository: BVLC/caffe
// path: src/caffe/layers/softmax_layer.cu
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
// @cuda-agent sizes num=8 channels=21 spatial=512*512 verify num=2,3 channels=5,21 spatial=97,1021
// @cuda-agent launch grid=cdiv(num * channels * spatial, block) block=512
// @cuda-agent arg count = num * channels * spatial
// @cuda-agent arg num = num
// @cuda-agent arg channels = channels
// @cuda-agent arg spatial_dim = spatial
// @cuda-agent arg channel_max in float[num * spatial]
// @cuda-agent arg data inout float[num * channels * spatial]
template <typename Dtype>
__global__ void kernel_channel_subtract(const int count,
    const int num, const int channels,
    const int spatial_dim, const Dtype* channel_max, Dtype* data) {
  CUDA_KERNEL_LOOP(index, count) {
    int n = index / channels / spatial_dim;
    int s = index % spatial_dim;
    data[index] -= channel_max[n * spatial_dim + s];
  }
}
