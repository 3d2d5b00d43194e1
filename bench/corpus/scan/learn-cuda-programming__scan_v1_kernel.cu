// cuda-agent corpus: scan
// repository: PacktPublishing/Learn-CUDA-Programming
// path: Chapter07/07_parallel_programming_pattern/03_scan/scan_v1.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// expert: scan_v2_kernel in learn-cuda-programming__scan_v2_kernel.cu (structural: Blelloch work-efficient scan in shared memory)
// Upstream text, unchanged but for `// @cuda-agent` spec lines.
#include "scan.h"

// @cuda-agent sizes n=1024 verify n=512,1536
// @cuda-agent launch grid=cdiv(n, 512) block=512
// @cuda-agent arg d_output out float[n]
// @cuda-agent arg d_input in float[n]
// @cuda-agent arg length = n
__global__ void
scan_v1_kernel(float *d_output, float *d_input, int length)
{
    int idx = blockDim.x * blockIdx.x + threadIdx.x;
        
    float element = 0.f;
    for (int offset = 0; offset < length; offset++) {
        if (idx - offset >= 0)
            element += d_input[idx - offset];
    }
    d_output[idx] = element;
}

void scan_v1(float *d_output, float *d_input, int length)
{
    dim3 dimBlock(BLOCK_DIM);
    dim3 dimGrid((length + BLOCK_DIM - 1) / BLOCK_DIM);
    scan_v1_kernel<<<dimGrid, dimBlock>>>(d_output, d_input, length);
}