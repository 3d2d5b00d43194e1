// Kernels with mistakes only a compiler sees, and one declared through a macro.
#define KERNEL extern "C" __global__ void

struct Accum {
    float sum;
    int count;
};

__device__ float mean_of(const Accum& a) { return a.count ? a.sum / a.count : 0.0f; }

__global__ void mean_kernel(const Accum* acc, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = mean_of(acc[i]);
}

__global__ void typo_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * scale_factr;  // ERROR-HERE: undeclared identifier
}

KERNEL macro_kernel(float* y) { y[threadIdx.x] = 0.0f; }
