#pragma once
#include "common.h"

// out[r][c] = alpha * in[r][c] + bias[c]
__global__ void scale_rows(float* out, const float* in, const float* bias, int rows, int cols, float alpha) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        out[r * cols + c] = alpha * in[r * cols + c] + bias[c];
    }
}
