// origin: PacktPublishing/Learn-CUDA-Programming
// path: Chapter07/07_parallel_programming_pattern/03_scan/scan_v1.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// A thread per output sums the elements before it (offset form, window `length`): a prefix sum at O(n^2).
// @cuda-agent sizes n=4096 verify n=512,1536
// @cuda-agent launch grid=cdiv(n, 512) block=512
// @cuda-agent arg d_output out float[n]
// @cuda-agent arg d_input in float[n] uniform(-1, 1)
// @cuda-agent arg length = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
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
