// Row softmax two ways: the naive thread-per-row kernel of bench/kernels/softmax.cu, and a
// hand-written block-per-row rewrite whose reductions go through dynamic shared memory.
//   cuda-agent compare tests/data/compare/softmax_pair.cu -k softmax --with softmax_rows
#include <math.h>

// @cuda-agent sizes rows=16384 cols=512 verify rows=5,33 cols=7,100
// @cuda-agent launch grid=cdiv(rows, block) block=128
// @cuda-agent arg x in float[rows * cols] uniform(-5, 5)
// @cuda-agent arg y out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-6 rtol=1e-4
__global__ void softmax(const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* in = x + (size_t)r * cols;
    float* out = y + (size_t)r * cols;
    float m = in[0];
    for (int j = 1; j < cols; ++j) m = fmaxf(m, in[j]);
    float sum = 0.0f;
    for (int j = 0; j < cols; ++j) sum += expf(in[j] - m);
    for (int j = 0; j < cols; ++j) out[j] = expf(in[j] - m) / sum;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

// The block's max (or sum) of v: each warp reduces with shuffles, warp results meet in `slots`
// (one float per warp, dynamic shared memory), then every warp reduces the slots.
__device__ float block_reduce(float v, float* slots, bool is_max) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = is_max ? warp_max(v) : warp_sum(v);
    if (lane == 0) slots[warp] = v;
    __syncthreads();
    v = lane < warps ? slots[lane] : (is_max ? -INFINITY : 0.0f);
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads();  // the slots are reused by the next reduction
    return v;
}

// One block per row; blockDim.x a multiple of 32, at most 1024.
// @cuda-agent launch grid=rows block=256 smem=(block / 32) * 4
__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    extern __shared__ float slots[];
    int r = blockIdx.x;
    if (r >= rows) return;  // the same for the whole block: no barrier is skipped by part of it
    const float* in = x + (size_t)r * cols;
    float* out = y + (size_t)r * cols;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, in[j]);
    m = block_reduce(m, slots, true);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) sum += expf(in[j] - m);
    sum = block_reduce(sum, slots, false);
    for (int j = threadIdx.x; j < cols; j += blockDim.x) out[j] = expf(in[j] - m) / sum;
}
