// cuda-agent corpus: elementwise
// repository: BVLC/caffe
// path: src/caffe/layers/embed_layer.cu
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
// @cuda-agent sizes m=64*512 n=512 k=10000 verify m=33,70 n=31,64 k=100,57
// @cuda-agent launch grid=cdiv(m * n, block) block=512
// @cuda-agent arg nthreads = m * n
// @cuda-agent arg bottom_data in float[m] randint(0, k)
// @cuda-agent arg weight in float[k * n]
// @cuda-agent arg M = m
// @cuda-agent arg N = n
// @cuda-agent arg K = k
// @cuda-agent arg top_data out float[m * n]
// @cuda-agent work bytes=m * 4 + 2 * m * n * 4
template <typename Dtype>
__global__ void EmbedForward(const int nthreads, const Dtype* bottom_data,
    const Dtype* weight, const int M, const int N, const int K,
    Dtype* top_data) {
  CUDA_KERNEL_LOOP(top_index, nthreads) {
    const int n = top_index / N;
    const int d = top_index % N;
    const int index = static_cast<int>(bottom_data[n]);
    #ifdef DEBUG
        assert(index >= 0);
        assert(index < K);
        assert(static_cast<Dtype>(index) == bottom_data[n]);
    #endif
    const int weight_index = index * N + d;
    top_data[top_index] = weight[weight_index];
  }
}
