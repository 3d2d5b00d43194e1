// Shared helpers for the reduction and stencil kernels.
#pragma once

#include <cuda_fp16.h>
#include <cstdint>

#define WARP_SIZE 32
#define FULL_MASK 0xffffffffu
#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

struct Float2Pair {
    float lo;
    float hi;
};

template <typename T>
__device__ __forceinline__ T warp_reduce_sum(T v) {
    for (int offset = WARP_SIZE / 2; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(FULL_MASK, v, offset);
    }
    return v;
}

__device__ inline float to_float(__half h) { return __half2float(h); }
__device__ inline float to_float(float f) { return f; }
