// cuda-agent corpus: tree_reduction
// repository: PacktPublishing/Learn-CUDA-Programming
// path: Chapter03/03_cuda_thread_programming/03_threadsync_and_reduction/reduction_shared_kernel.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// expert: reduction_kernel_2 in learn-cuda-programming__reduction_kernel_2.cu (structural: sequential addressing (chapter 3's next step))
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <stdio.h>

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
// @cuda-agent arg d_out out float[cdiv(n, block)]
// @cuda-agent arg d_in in float[n]
// @cuda-agent arg size = n
__global__ void
reduction_kernel(float* d_out, float* d_in, unsigned int size)
{
    unsigned int idx_x = blockIdx.x * blockDim.x + threadIdx.x;

    extern __shared__ float s_data[];

    s_data[threadIdx.x] = (idx_x < size) ? d_in[idx_x] : 0.f;

    __syncthreads();

    // do reduction
    for (unsigned int stride = 1; stride < blockDim.x; stride *= 2)
    {
        // thread synchronous reduction
        if ( (idx_x % (stride * 2)) == 0 )
            s_data[threadIdx.x] += s_data[threadIdx.x + stride];

        __syncthreads();
    }

    if (threadIdx.x == 0)
        d_out[blockIdx.x] = s_data[0];
}
