// Interleaved tree with the block's sync() method and the shared size a macro.
#include <cooperative_groups.h>
#define BLOCK_SIZE 128
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 128) block=128
// @cuda-agent arg in in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[cdiv(n, 128)]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void block_sum(const float* in, float* out, int n) {
    auto block = cooperative_groups::this_thread_block();
    __shared__ float partial[BLOCK_SIZE];
    int t = threadIdx.x;
    int g = blockIdx.x * BLOCK_SIZE + t;
    partial[t] = g < n ? in[g] : 0.0f;
    block.sync();
    for (int stride = 1; stride < blockDim.x; stride *= 2) {
        if (t % (2 * stride) == 0) partial[t] += partial[t + stride];
        block.sync();
    }
    if (t == 0) out[blockIdx.x] = partial[0];
}
