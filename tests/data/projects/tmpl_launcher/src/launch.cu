#include "block_sum.cuh"

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

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
    return 0;
}
