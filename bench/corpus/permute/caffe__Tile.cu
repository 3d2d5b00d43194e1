// cuda-agent corpus: permute
// repository: BVLC/caffe
// path: src/caffe/layers/tile_layer.cu
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
// @cuda-agent sizes n=64 axis=256 tiles=4 tile=49 verify n=3,2 axis=5,7 tiles=2,3 tile=7,11
// @cuda-agent launch grid=cdiv(n * axis * tiles * tile, block) block=512
// @cuda-agent arg nthreads = n * axis * tiles * tile
// @cuda-agent arg bottom_data in float[n * axis * tile]
// @cuda-agent arg tile_size = tile
// @cuda-agent arg num_tiles = tiles
// @cuda-agent arg bottom_tile_axis = axis
// @cuda-agent arg top_data out float[n * axis * tiles * tile]
template <typename Dtype>
__global__ void Tile(const int nthreads, const Dtype* bottom_data,
    const int tile_size, const int num_tiles, const int bottom_tile_axis,
    Dtype* top_data) {
  CUDA_KERNEL_LOOP(index, nthreads) {
    const int d = index % tile_size;
    const int b = (index / tile_size / num_tiles) % bottom_tile_axis;
    const int n = index / tile_size / num_tiles / bottom_tile_axis;
    const int bottom_index = (n * bottom_tile_axis + b) * tile_size + d;
    top_data[index] = bottom_data[bottom_index];
  }
}
