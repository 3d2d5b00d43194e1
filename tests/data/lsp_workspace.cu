// Element-wise steps of a small signal pipeline, as a language-server test workspace:
// one kernel with a spec, one without, one with a compile error, one without a bounds check.
#include <cuda_runtime.h>

// y = a * x + y over n elements.
// @cuda-agent sizes n=1<<20
// @cuda-agent launch grid=cdiv(n, block) block=32
// @cuda-agent arg x in float[n]
// @cuda-agent arg y inout float[n]
// @cuda-agent arg a = 2
// @cuda-agent arg n = n
__global__ void saxpy(const float* x, float* y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void scale(float* v, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] *= s;
}

__global__ void gain_stage(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * gain;
}

__device__ float clamp_unit(float v)
{
    return fminf(fmaxf(v, 0.0f), 1.0f);
}

// Copies a frame; the launch rounds up, but nothing stops the extra threads.
// @cuda-agent sizes n=1000
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
__global__ void copy_frame(const float* x, float* y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = x[i];
}

void run(const float* x, float* y, float* v, int n)
{
    saxpy<<<(n + 31) / 32, 32>>>(x, y, 2.0f, n);
    scale<<<(n + 99) / 100, 100>>>(v, 0.5f, n);
}
