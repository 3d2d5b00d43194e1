// A naive vector add and a hand-written rewrite of it in the same file.
#include <cuda_runtime.h>

__device__ __forceinline__ float add2(float x, float y) { return x + y; }

// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=32
// @cuda-agent arg a in float[n]
// @cuda-agent arg b in float[n]
// @cuda-agent arg c out float[n]
__global__ void vadd(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = add2(a[i], b[i]);
}

// My rewrite: four elements per thread; only its launch line is taken, the rest is vadd's spec.
// @cuda-agent launch grid=cdiv(n, 4 * block) block=256
__global__ void vadd_x4(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c,
                        int n) {
    int base = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    for (int j = 0; j < 4; ++j) {
        int i = base + j;
        if (i < n) c[i] = add2(a[i], b[i]);
    }
}

// Not a rewrite of vadd: the element count comes first.
__global__ void vadd_swapped(int n, const float* a, const float* b, float* c) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// Not a rewrite of vadd either: doubles.
__global__ void vadd_double(const double* a, const double* b, double* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
