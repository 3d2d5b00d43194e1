// cuda-agent corpus: tree_reduction
// repository: PacktPublishing/Learn-CUDA-Programming
// path: Chapter03/03_cuda_thread_programming/05_warp_divergence/reduction_kernel_interleaving.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// expert: reduction_kernel_2 in learn-cuda-programming__reduction_kernel_2.cu (structural: sequential addressing)
// Upstream text, unchanged but for `// @cuda-agent` spec lines.
#include <stdio.h>
#include "reduction.h"

/*
    Parallel sum reduction using shared memory
    - takes log(n) steps for n input elements
    - uses n threads
    - only works for power-of-2 arrays
*/

// cuda thread synchronization
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256 smem=block * 4
// @cuda-agent require pow2(block)
// @cuda-agent arg g_out out float[cdiv(n, block)]
// @cuda-agent arg g_in in float[n]
// @cuda-agent arg size = n
__global__ void
reduction_kernel_1(float* g_out, float* g_in, unsigned int size)
{
    unsigned int idx_x = blockIdx.x * blockDim.x + threadIdx.x;

    extern __shared__ float s_data[];

    s_data[threadIdx.x] = (idx_x < size) ? g_in[idx_x] : 0.f;

    __syncthreads();

    // do reduction
    // interleaved addressing
    for (unsigned int stride = 1; stride < blockDim.x; stride *= 2)
    {
        int index = 2 * stride * threadIdx.x;
        
        if (index < blockDim.x)
            s_data[index] += s_data[index + stride];
        
        __syncthreads();
    }

    if (threadIdx.x == 0)
        g_out[blockIdx.x] = s_data[0];
}

int reduction(float *g_outPtr, float *g_inPtr, int size, int n_threads)
{
    int n_blocks = (size + n_threads - 1) / n_threads;
    reduction_kernel_1<<< n_blocks, n_threads, n_threads * sizeof(float), 0 >>>(g_outPtr, g_inPtr, size);
    return n_blocks;
}
