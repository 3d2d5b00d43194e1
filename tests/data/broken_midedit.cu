// A file being edited: the middle kernel is half-typed.
#include <cuda_runtime.h>

__global__ void relu(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

__global__ void half_typed(float* out, int n) {
    int i = blockIdx.x * blockDim.x +
    if (i < n) out[i] = (

__global__ void square(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * x[i];
}
