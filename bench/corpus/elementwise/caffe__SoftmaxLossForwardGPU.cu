// cuda-agent corpus: elementwise
// repository: BVLC/caffe
// path: src/caffe/layers/softmax_loss_layer.cu
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
// @cuda-agent sizes num=8 c=21 s=512*512 verify num=2,3 c=5,21 s=97,1021
// @cuda-agent launch grid=cdiv(num * s, block) block=512
// @cuda-agent arg nthreads = num * s
// @cuda-agent arg prob_data in float[num * c * s] uniform(0.01, 1)
// @cuda-agent arg label in float[num * s] randint(0, c)
// @cuda-agent arg loss out float[num * s]
// @cuda-agent arg num = num
// @cuda-agent arg dim = c * s
// @cuda-agent arg spatial_dim = s
// @cuda-agent arg has_ignore_label_ = 0
// @cuda-agent arg ignore_label_ = -1
// @cuda-agent arg counts out float[num * s]
template <typename Dtype>
__global__ void SoftmaxLossForwardGPU(const int nthreads,
          const Dtype* prob_data, const Dtype* label, Dtype* loss,
          const int num, const int dim, const int spatial_dim,
          const bool has_ignore_label_, const int ignore_label_,
          Dtype* counts) {
  CUDA_KERNEL_LOOP(index, nthreads) {
    const int n = index / spatial_dim;
    const int s = index % spatial_dim;
    const int label_value = static_cast<int>(label[n * spatial_dim + s]);
    if (has_ignore_label_ && label_value == ignore_label_) {
      loss[index] = 0;
      counts[index] = 0;
    } else {
      loss[index] = -log(max(prob_data[n * dim + label_value * spatial_dim + s],
                      Dtype(FLT_MIN)));
      counts[index] = 1;
    }
  }
}
