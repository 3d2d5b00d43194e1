// cuda-agent corpus: rows
// repository: zjin-lcf/HeCBench
// path: src/attention-cuda/kernels.h
// commit: f27000a5188f8ac79bd43fc95a1b3f890c18823d
// license: BSD-3-Clause
// expert: attention_kernel1_warpReduce (structural: a warp per row of the key (cooperative-groups reduce))
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

// @cuda-agent sizes n=65536 d=2048 verify n=37,301 d=33,257
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg key in float[n * d] uniform(-0.1, 0.1)
// @cuda-agent arg query in float[d] uniform(-0.1, 0.1)
// @cuda-agent arg dot_product out float[n]
// @cuda-agent arg exp_sum inout float[1] const(0)
// @cuda-agent arg n = n
// @cuda-agent arg d = d
// @cuda-agent tolerance rtol=1e-4
// @cuda-agent tolerance arg=dot_product atol=2e-5 rtol=1e-4
__global__
void attention_kernel1 (
    const float*__restrict__ key,
    const float*__restrict__ query,
    float*__restrict__ dot_product,
    float*__restrict__ exp_sum,
    const int n,
    const int d)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float sum = 0;
    for (int j = 0; j < d; j++)
      sum += key[i * d + j] * query[j];
    dot_product[i] = sum;
    atomicAdd(exp_sum, __expf(sum));
  }
}

// @cuda-agent sizes n=65536 d=2048 verify n=37,301 d=33,257
// @cuda-agent launch grid=cdiv(n, block / 32) block=256
// @cuda-agent arg key in float[n * d] uniform(-0.1, 0.1)
// @cuda-agent arg query in float[d] uniform(-0.1, 0.1)
// @cuda-agent arg dot_product out float[n]
// @cuda-agent arg exp_sum inout float[1] const(0)
// @cuda-agent arg n = n
// @cuda-agent arg d = d
// @cuda-agent tolerance rtol=1e-4
// @cuda-agent tolerance arg=dot_product atol=2e-5 rtol=1e-4
__global__
void attention_kernel1_warpReduce (
    const float*__restrict__ key,
    const float*__restrict__ query,
    float*__restrict__ dot_product,
    float*__restrict__ exp_sum,
    const int n,
    const int d)
{
  namespace cg = cooperative_groups;
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  // each i iteration is assigned to a warp
  // meta_group_size is the number of warps in a block, and meta_group_rank is the warp index
  int i = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
  if (i < n) {
    float sum = 0;
    for (int j = warp.thread_rank(); j < d; j += warp.size()) {
      sum += key[i * d + j] * query[j];
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    if (warp.thread_rank() == 0) {
      dot_product[i] = sum;
      atomicAdd(exp_sum, __expf(sum));
    }
  }
}
