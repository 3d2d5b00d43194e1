// 1- and 2-byte element types as real code writes them: bf16 and half storage with float math,
// int8/uint8 images, a bf16 input of a float output (packs of different sizes), indices held in
// variables with `size_t` casts and an early return.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

// @cuda-agent sizes n=1<<22 verify n=1001,4099
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in bfloat16[n] uniform(-2, 2)
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
__global__ void widen_bf16(const __nv_bfloat16* x, float* y, int n) {
    int tid = threadIdx.x;
    int i = tid + blockDim.x * blockIdx.x;
    if (n > i) {
        y[i] = 2.0f * __bfloat162float(x[i]);
    }
}

// @cuda-agent sizes n=1<<22 verify n=1001,4099
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float16[n] uniform(-1, 1)
// @cuda-agent arg y inout float16[n] uniform(-1, 1)
// @cuda-agent arg a = 1.5
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-3 rtol=1e-3
__global__ void axpy_half(const __half* x, __half* y, float a, int n) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n) return;
    y[i] = __float2half(a * __half2float(x[i]) + __half2float(y[(size_t)i]));
}

// @cuda-agent sizes n=1<<24 verify n=1001,4099
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg img in uint8[n] randint(0, 256)
// @cuda-agent arg out out uint8[n]
// @cuda-agent arg n = n
__global__ void invert_u8(const unsigned char* img, unsigned char* out, int n) {
    unsigned int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) out[idx] = 255 - img[idx];
}

// @cuda-agent sizes n=1<<24 verify n=1001,4099
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in int8[n] randint(-128, 128)
// @cuda-agent arg y out int8[n]
// @cuda-agent arg n = n
__global__ void relu_s8(const signed char* x, signed char* y, int n) {
    const int base = blockIdx.x * blockDim.x;
    const int i = base + threadIdx.x;
    if (i >= n) return;
    signed char v = x[i];
    y[i] = v > 0 ? v : (signed char)0;
}

// llm.c style: a grid-stride loop over a fixed grid (2 blocks per SM of an H200, whatever n).
// @cuda-agent sizes n=1<<24 verify n=1001,4099
// @cuda-agent launch grid=264 block=512
// @cuda-agent arg y out bfloat16[n]
// @cuda-agent arg x in bfloat16[n] uniform(-2, 2)
// @cuda-agent arg s = 0.75
// @cuda-agent arg n = n
__global__ void scale_bf16_loop(__nv_bfloat16* y, const __nv_bfloat16* x, float s, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = __float2bfloat16(s * __bfloat162float(x[i]));
    }
}
