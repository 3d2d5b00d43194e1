#include "block_sum.cuh"

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

// the block sums as means: uses a device helper of include/block_sum.cuh
__global__ void scale_partial(float* partial, int count, float s) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < count) partial[i] = scaled(partial[i], s);
}

template <int BLOCK>
void launch_sum(const float* in, float* partial, int n) {
    const int grid = CEIL_DIV(n, BLOCK);
    const size_t smem = BLOCK <= 32 ? 2 * BLOCK * sizeof(float) : BLOCK * sizeof(float);
    block_sum<BLOCK><<<grid, BLOCK, smem>>>(in, partial, n);
}

int main() {
    static const int N = 1 << 18;
    float *in, *partial;
    cudaMalloc(&in, N * sizeof(float));
    cudaMalloc(&partial, CEIL_DIV(N, 128) * sizeof(float));
    launch_sum<128>(in, partial, N);
    const int blocks = CEIL_DIV(N, 128);
    scale_partial<<<CEIL_DIV(blocks, 64), 64>>>(partial, blocks, 1.0f / 128);
    return 0;
}
