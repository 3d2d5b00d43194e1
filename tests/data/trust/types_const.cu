// Element types and spec directives the sandbox must handle on the GPU: bf16 outputs, integer
// outputs accumulated with atomics (an `inout` counter), a `__constant__` array (`const` line).
#include <cuda_bf16.h>

// bf16 residual add, one element per thread.
// @cuda-agent sizes n=1<<22 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg out out bfloat16[n]
// @cuda-agent arg a in bfloat16[n] uniform(-1, 1)
// @cuda-agent arg b in bfloat16[n] uniform(-1, 1)
__global__ void residual_bf16(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}

// Two elements per thread through __nv_bfloat162 (the same roundings).
// @cuda-agent launch grid=cdiv(n, 2 * block) block=256
__global__ void residual_bf16x2(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b, int n) {
    int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 1 < n) {
        float2 fa = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(a + i));
        float2 fb = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(b + i));
        *reinterpret_cast<__nv_bfloat162*>(out + i) = __floats2bfloat162_rn(fa.x + fb.x, fa.y + fb.y);
    } else if (i < n) {
        out[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
    }
}

// Forgets the second operand.
__global__ void residual_bf16_wrong(__nv_bfloat16* out, const __nv_bfloat16* a, const __nv_bfloat16* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i];
}

// 256-bin histogram with global atomics: the bins accumulate across launches unless restored.
// @cuda-agent sizes n=1<<22 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg data in int[n] randint(0, 256)
// @cuda-agent arg hist inout unsigned int[256] const(0)
__global__ void histogram(const int* data, unsigned int* hist, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&hist[data[i] & 255], 1u);
}

// Privatized in shared memory, then one atomic per bin and block.
__global__ void histogram_shared(const int* data, unsigned int* hist, int n) {
    __shared__ unsigned int local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i] & 255], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (local[b]) atomicAdd(&hist[b], local[b]);
}

// Counts without atomics: increments race and get lost.
__global__ void histogram_racy(const int* data, unsigned int* hist, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) hist[data[i] & 255] += 1u;
}

__constant__ float kPoly[4];

// A cubic with coefficients in constant memory, over a 2-D grid.
// @cuda-agent sizes rows=2048 cols=3000 verify rows=33 cols=1021
// @cuda-agent launch grid=(cdiv(cols, block_x), cdiv(rows, block_y)) block=(32, 8)
// @cuda-agent arg in in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg out out float[rows * cols]
// @cuda-agent const kPoly float[4] uniform(-1, 1)
__global__ void poly2d(const float* in, float* out, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        float x = in[r * cols + c];
        out[r * cols + c] = kPoly[0] + kPoly[1] * x + kPoly[2] * x * x + kPoly[3] * x * x * x;
    }
}

// Horner's rule, one element per thread over a 1-D grid.
// @cuda-agent launch grid=(cdiv(rows * cols, block_x), 1) block=(256, 1)
__global__ void poly2d_horner(const float* in, float* out, int rows, int cols) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * cols) {
        float x = in[i];
        out[i] = kPoly[0] + x * (kPoly[1] + x * (kPoly[2] + x * kPoly[3]));
    }
}
