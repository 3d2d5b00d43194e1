// cuda-agent corpus: elementwise
// repository: PacktPublishing/Learn-CUDA-Programming
// path: Chapter04/04_kernel_execution/10_kernel_execution_overhead/cuda_kernel.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <cstdio>

using namespace std;

// @cuda-agent sizes n=1<<20 verify n=1024,4096
// @cuda-agent launch grid=n / block block=256
// @cuda-agent arg y out float[n]
// @cuda-agent arg x in float[n]
// @cuda-agent arg alpha = 0.1
// @cuda-agent arg beta = 0.2
__global__ void
simple_saxpy_kernel(float *y, const float* x, const float alpha, const float beta)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    
    y[idx] = alpha * x[idx] + beta;
}

// @cuda-agent sizes n=1<<20 verify n=1024,4096
// @cuda-agent launch grid=n / block block=256
// @cuda-agent arg y out float[n]
// @cuda-agent arg x in float[n]
// @cuda-agent arg alpha = 0.1
// @cuda-agent arg beta = 0.2
// @cuda-agent arg n_loop = 100
__global__ void
iterative_saxpy_kernel(float *y, const float* x, const float alpha, const float beta, int n_loop)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;

    for (int i = 0; i < n_loop; i++)
        y[idx] = alpha * x[idx] + beta;
}
