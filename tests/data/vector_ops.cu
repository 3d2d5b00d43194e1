// Element-wise vector kernels with a small host driver.
#include <cstdio>
#include <cuda_runtime.h>

#define BLOCK_SIZE 256

__constant__ float kPoly[4];

__device__ __forceinline__ float poly3(float x) {
    return ((kPoly[3] * x + kPoly[2]) * x + kPoly[1]) * x + kPoly[0];
}

// c = a + b
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg a in float[n] uniform(-1, 1)
// @cuda-agent arg b in float[n] uniform(-1, 1)
// @cuda-agent arg c out float[n]
__global__ void vadd(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

// y = alpha * x + y, four elements per thread through float4.
// @cuda-agent sizes n=1<<22
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg x in float4[n] uniform(-2, 2)
// @cuda-agent arg y inout float4[n]
// @cuda-agent arg alpha = 0.5
// @cuda-agent work bytes=3*16*n flops=8*n
__global__ void saxpy4(int n, float alpha, const float4* x, float4* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float4 a = x[i], b = y[i];
        y[i] = make_float4(alpha * a.x + b.x, alpha * a.y + b.y, alpha * a.z + b.z, alpha * a.w + b.w);
    }
}

// Evaluates the cubic in kPoly at every x.
// @cuda-agent sizes n=1<<24
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
// @cuda-agent const kPoly float[4] uniform(-1, 1)
__global__ void poly_eval(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = poly3(x[i]);
}

// Gathers x[idx[i]] (indices drawn in range).
__global__ void gather(const float* __restrict__ x, const int* __restrict__ idx, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[idx[i]];
}

int main() {
    int N = 1 << 20;
    size_t bytes = N * sizeof(float);
    float *d_a, *d_b, *d_c;
    cudaMalloc(&d_a, bytes);
    cudaMalloc((void**)&d_b, N * sizeof(float));
    cudaMalloc(&d_c, N * sizeof(float));
    int threads = BLOCK_SIZE;
    int blocks = (N + threads - 1) / threads;
    vadd<<<blocks, threads>>>(d_a, d_b, d_c, N);
    vadd<<<
        (N + 255) / 256,
        256,
        0,
        0>>>(d_a,
             d_b,
             d_c, N);
    cudaDeviceSynchronize();
    return 0;
}
