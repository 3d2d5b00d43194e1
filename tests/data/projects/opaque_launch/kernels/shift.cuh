#pragma once

__global__ void shift_scale(float* out, const float* in, int n, float scale) {
    extern __shared__ float stage[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    stage[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = scale * stage[threadIdx.x];
}
