// cuda-agent corpus: convolution
// repository: BVLC/caffe
// path: src/caffe/util/im2col.cu
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
// @cuda-agent sizes c=96 h=27 w=27 verify c=3,5 h=9,13 w=11,7
// @cuda-agent launch grid=cdiv(c * h * w, block) block=512
// @cuda-agent arg n = c * h * w
// @cuda-agent arg data_im in float[c * h * w]
// @cuda-agent arg height = h
// @cuda-agent arg width = w
// @cuda-agent arg kernel_h = 5
// @cuda-agent arg kernel_w = 5
// @cuda-agent arg pad_h = 2
// @cuda-agent arg pad_w = 2
// @cuda-agent arg stride_h = 1
// @cuda-agent arg stride_w = 1
// @cuda-agent arg dilation_h = 1
// @cuda-agent arg dilation_w = 1
// @cuda-agent arg height_col = h
// @cuda-agent arg width_col = w
// @cuda-agent arg data_col out float[c * 25 * h * w]
template <typename Dtype>
__global__ void im2col_gpu_kernel(const int n, const Dtype* data_im,
    const int height, const int width, const int kernel_h, const int kernel_w,
    const int pad_h, const int pad_w,
    const int stride_h, const int stride_w,
    const int dilation_h, const int dilation_w,
    const int height_col, const int width_col,
    Dtype* data_col) {
  CUDA_KERNEL_LOOP(index, n) {
    const int h_index = index / width_col;
    const int h_col = h_index % height_col;
    const int w_col = index % width_col;
    const int c_im = h_index / height_col;
    const int c_col = c_im * kernel_h * kernel_w;
    const int h_offset = h_col * stride_h - pad_h;
    const int w_offset = w_col * stride_w - pad_w;
    Dtype* data_col_ptr = data_col;
    data_col_ptr += (c_col * height_col + h_col) * width_col + w_col;
    const Dtype* data_im_ptr = data_im;
    data_im_ptr += (c_im * height + h_offset) * width + w_offset;
    for (int i = 0; i < kernel_h; ++i) {
      for (int j = 0; j < kernel_w; ++j) {
        int h_im = h_offset + i * dilation_h;
        int w_im = w_offset + j * dilation_w;
        *data_col_ptr =
            (h_im >= 0 && w_im >= 0 && h_im < height && w_im < width) ?
            data_im_ptr[i * dilation_h * width + j * dilation_w] : 0;
        data_col_ptr += height_col * width_col;
      }
    }
  }
}
