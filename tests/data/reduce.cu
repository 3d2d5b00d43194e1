// Block-wise sum reduction, templated on element type and block size.
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

#include "common.cuh"

constexpr int kDefaultBlock = 256;

// Sum of each block's slice of `in`, one partial sum per block.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent template float, 256
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg in in float[n] uniform(-1, 1)
// @cuda-agent arg partial out float[cdiv(n, 256)]
// @cuda-agent tolerance atol=1e-4 rtol=1e-5
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK, 2)
block_sum(const T* __restrict__ in, float* __restrict__ partial, int n)
{
    __shared__ float warp_sums[BLOCK / WARP_SIZE];
    const int tid = threadIdx.x;
    const int i = blockIdx.x * BLOCK + tid;
    float v = i < n ? to_float(in[i]) : 0.0f;
    v = warp_reduce_sum(v);
    if (tid % WARP_SIZE == 0) warp_sums[tid / WARP_SIZE] = v;
    __syncthreads();
    if (tid < WARP_SIZE) {
        v = tid < BLOCK / WARP_SIZE ? warp_sums[tid] : 0.0f;
        v = warp_reduce_sum(v);
        if (tid == 0) partial[blockIdx.x] = v;
    }
}

// Pairs of (min, max) per block, written as a struct.
__global__ void minmax_pairs(const float* __restrict__ x, Float2Pair* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        Float2Pair p;
        p.lo = fminf(x[i], 0.0f);
        p.hi = fmaxf(x[i], 0.0f);
        out[i] = p;
    }
}

int main() {
    const int n = 1 << 22;
    const int blocks = CEIL_DIV(n, kDefaultBlock);
    float *d_in, *d_partial;
    cudaMalloc(&d_in, n * sizeof(float));
    cudaMalloc(&d_partial, blocks * sizeof(float));
    block_sum<float, kDefaultBlock><<<blocks, kDefaultBlock>>>(d_in, d_partial, n);
    std::vector<float> h(blocks);
    cudaMemcpy(h.data(), d_partial, blocks * sizeof(float), cudaMemcpyDeviceToHost);
    printf("%f\n", h[0]);
    return 0;
}
