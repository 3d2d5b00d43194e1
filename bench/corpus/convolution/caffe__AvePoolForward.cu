// cuda-agent corpus: convolution
// repository: BVLC/caffe
// path: src/caffe/layers/pooling_layer.cu
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
// @cuda-agent sizes num=128 ch=96 h=55 w=55 ph=27 pw=27 verify num=2,1 ch=3,5 h=15,31 w=17,29 ph=7,15 pw=8,14
// @cuda-agent launch grid=cdiv(num * ch * ph * pw, block) block=512
// @cuda-agent arg nthreads = num * ch * ph * pw
// @cuda-agent arg bottom_data in float[num * ch * h * w]
// @cuda-agent arg num = num
// @cuda-agent arg channels = ch
// @cuda-agent arg height = h
// @cuda-agent arg width = w
// @cuda-agent arg pooled_height = ph
// @cuda-agent arg pooled_width = pw
// @cuda-agent arg kernel_h = 3
// @cuda-agent arg kernel_w = 3
// @cuda-agent arg stride_h = 2
// @cuda-agent arg stride_w = 2
// @cuda-agent arg pad_h = 0
// @cuda-agent arg pad_w = 0
// @cuda-agent arg top_data out float[num * ch * ph * pw]
template <typename Dtype>
__global__ void AvePoolForward(const int nthreads,
    const Dtype* const bottom_data, const int num, const int channels,
    const int height, const int width, const int pooled_height,
    const int pooled_width, const int kernel_h, const int kernel_w,
    const int stride_h, const int stride_w, const int pad_h, const int pad_w,
    Dtype* const top_data) {
  CUDA_KERNEL_LOOP(index, nthreads) {
    const int pw = index % pooled_width;
    const int ph = (index / pooled_width) % pooled_height;
    const int c = (index / pooled_width / pooled_height) % channels;
    const int n = index / pooled_width / pooled_height / channels;
    int hstart = ph * stride_h - pad_h;
    int wstart = pw * stride_w - pad_w;
    int hend = min(hstart + kernel_h, height + pad_h);
    int wend = min(wstart + kernel_w, width + pad_w);
    const int pool_size = (hend - hstart) * (wend - wstart);
    hstart = max(hstart, 0);
    wstart = max(wstart, 0);
    hend = min(hend, height);
    wend = min(wend, width);
    Dtype aveval = 0;
    const Dtype* const bottom_slice =
        bottom_data + (n * channels + c) * height * width;
    for (int h = hstart; h < hend; ++h) {
      for (int w = wstart; w < wend; ++w) {
        aveval += bottom_slice[h * width + w];
      }
    }
    top_data[index] = aveval / pool_size;
  }
}
