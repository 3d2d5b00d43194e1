// cuda-agent corpus: tree_reduction
// repository: PacktPublishing/Learn-CUDA-Programming
// path: Chapter03/03_cuda_thread_programming/10_atomic_operation/reduction_wrp_atmc_kernel.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <stdio.h>
#include <cooperative_groups.h>

using namespace cooperative_groups;

#define NUM_LOAD 4

#define FULL_MASK 0xffffffff

template <typename group_t>
__inline__ __device__ float warp_reduce_sum(group_t group, float val)
{
    #pragma unroll
    for (int offset = group.size() / 2; offset > 0; offset >>= 1)
        val += group.shfl_down(val, offset);
    return val;
}

// large vector reduction
// @cuda-agent sizes n=1<<24 verify n=2048,3840
// @cuda-agent launch grid=min(264, cdiv(n, block)) block=256
// @cuda-agent arg g_out inout float[1] const(0)
// @cuda-agent arg g_in in float[n]
// @cuda-agent arg size = n
// @cuda-agent tolerance atol=1e-2
__global__ void
reduction_wrp_atmc_kernel(float *g_out, float *g_in, unsigned int size)
{
    unsigned int idx_x = blockIdx.x * blockDim.x + threadIdx.x;
    thread_block block = this_thread_block();
    thread_block_tile<32> tile32 = tiled_partition<32>(block);

    // cumulates input with grid-stride loop and save to share memory
    float sum[NUM_LOAD] = { 0.f };
    for (int i = idx_x; i < size; i += blockDim.x * gridDim.x * NUM_LOAD)
    {
        for (int step = 0; step < NUM_LOAD; step++)
            sum[step] += (i + step * blockDim.x * gridDim.x < size) ? g_in[i + step * blockDim.x * gridDim.x] : 0.f;
    }
    for (int i = 1; i < NUM_LOAD; i++)
        sum[0] += sum[i];
    // warp synchronous reduction
    sum[0] = warp_reduce_sum(tile32, sum[0]);

    //if ((threadIdx.x & (warpSize - 1)) == 0)
    if (tile32.thread_rank() == 0)
        atomicAdd(&g_out[0], sum[0]);;
}
