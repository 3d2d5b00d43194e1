// cuda-agent corpus: rows
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
// @cuda-agent sizes num=8192 channels=1000 spatial=1 verify num=33,70 channels=31,100 spatial=1
// @cuda-agent launch grid=cdiv(num * spatial, block) block=512
// @cuda-agent arg num = num
// @cuda-agent arg channels = channels
// @cuda-agent arg spatial_dim = spatial
// @cuda-agent arg data in float[num * channels * spatial]
// @cuda-agent arg out out float[num * spatial]
template <typename Dtype>
__global__ void kernel_channel_max(const int num, const int channels,
    const int spatial_dim, const Dtype* data, Dtype* out) {
  CUDA_KERNEL_LOOP(index, num * spatial_dim) {
    int n = index / spatial_dim;
    int s = index % spatial_dim;
    Dtype maxval = -FLT_MAX;
    for (int c = 0; c < channels; ++c) {
      maxval = max(data[(n * channels + c) * spatial_dim + s], maxval);
    }
    out[index] = maxval;
  }
}
