// cuda-agent corpus: tree_reduction
// repository: PacktPublishing/Learn-CUDA-Programming
// path: Chapter03/03_cuda_thread_programming/06_limiter_balancing/reduction_kernel.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// expert: reduction_kernel in learn-cuda-programming__reduction_kernel_opt.cu (not structural: four loads in flight per grid-stride step)
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <stdio.h>


/*
    Parallel sum reduction using shared memory
    - takes log(n) steps for n input elements
    - uses n threads
    - only works for power-of-2 arrays
*/
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=min(528, cdiv(n, block)) block=256 smem=block * 4
// @cuda-agent require pow2(block)
// @cuda-agent arg g_out out float[min(528, cdiv(n, block))]
// @cuda-agent arg g_in in float[n]
// @cuda-agent arg size = n
// @cuda-agent tolerance atol=1e-3
__global__ void
reduction_kernel(float *g_out, float *g_in, unsigned int size)
{
    unsigned int idx_x = blockIdx.x * blockDim.x + threadIdx.x;

    extern __shared__ float s_data[];

    // cumulates input with grid-stride loop and save to share memory
    float input = 0.f;
    for (int i = idx_x; i < size; i += blockDim.x * gridDim.x)
        input += g_in[i];
    s_data[threadIdx.x] = input;

    __syncthreads();

    // do reduction
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1)
    {
        if (threadIdx.x < stride) 
            s_data[threadIdx.x] += s_data[threadIdx.x + stride];

        __syncthreads();
    }

    if (threadIdx.x == 0) {
        g_out[blockIdx.x] = s_data[0];
    }
}
