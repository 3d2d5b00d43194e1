// Specs with mistakes: each is reported at its own line.
#include <cuda_runtime.h>

// @cuda-agent sizes n=1<<20
// @cuda-agent launch grid=cdiv(n, block) block=BLOCK
// @cuda-agent arg x in floot[n]
// @cuda-agent arg y out float[n] gaussian
// @cuda-agent arg z in float[n]
// @cuda-agent tolerance atol=tiny
__global__ void scale(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

// @cuda-agent sizes n=1<<20
// @cuda-agent launch grid=cdiv(n, block) block=__import__('os').getpid()
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
// @cuda-agent verify n=0
__global__ void scale2(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
