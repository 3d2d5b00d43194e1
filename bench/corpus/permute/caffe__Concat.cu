// cuda-agent corpus: permute
// repository: BVLC/caffe
// path: src/caffe/layers/concat_layer.cu
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
// @cuda-agent sizes n=64 bottom=256 top=512 size=28*28 verify n=3,2 bottom=5,7 top=11,9 size=13,17
// @cuda-agent launch grid=cdiv(n * bottom * size, block) block=512
// @cuda-agent arg nthreads = n * bottom * size
// @cuda-agent arg in_data in float[n * bottom * size]
// @cuda-agent arg forward = 1
// @cuda-agent arg num_concats = n
// @cuda-agent arg concat_size = size
// @cuda-agent arg top_concat_axis = top
// @cuda-agent arg bottom_concat_axis = bottom
// @cuda-agent arg offset_concat_axis = top - bottom
// @cuda-agent arg out_data out float[n * top * size]
// @cuda-agent compare out_data written
template <typename Dtype>
__global__ void Concat(const int nthreads, const Dtype* in_data,
    const bool forward, const int num_concats, const int concat_size,
    const int top_concat_axis, const int bottom_concat_axis,
    const int offset_concat_axis, Dtype* out_data) {
  CUDA_KERNEL_LOOP(index, nthreads) {
    const int total_concat_size = concat_size * bottom_concat_axis;
    const int concat_num = index / total_concat_size;
    const int concat_index = index % total_concat_size;
    const int top_index = concat_index +
        (concat_num * top_concat_axis + offset_concat_axis) * concat_size;
    if (forward) {
      out_data[top_index] = in_data[index];
    } else {
      out_data[index] = in_data[top_index];
    }
  }
}
