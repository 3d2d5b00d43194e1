// cuda-agent corpus: tree_reduction
// repository: PacktPublishing/Learn-CUDA-Programming
// path: Chapter03/03_cuda_thread_programming/10_atomic_operation/reduction_kernel.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// expert: reduction_wrp_atmc_kernel in learn-cuda-programming__reduction_wrp_atmc_kernel.cu (structural: grid-stride loads, a warp-shuffle reduction, one atomic per warp)
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <stdio.h>
#include <cooperative_groups.h>

using namespace cooperative_groups;

// @cuda-agent sizes n=1<<24 verify n=2048,3840
// @cuda-agent launch grid=n / block block=256
// @cuda-agent require n % block == 0
// @cuda-agent arg data_out inout float[1] const(0)
// @cuda-agent arg data_in in float[n]
// @cuda-agent arg size = n
// @cuda-agent tolerance atol=1
__global__ void
atomic_reduction_kernel(float *data_out, float *data_in, int size)
{
    int idx_x = blockIdx.x * blockDim.x + threadIdx.x;

    atomicAdd(&data_out[0], data_in[idx_x]);
}
