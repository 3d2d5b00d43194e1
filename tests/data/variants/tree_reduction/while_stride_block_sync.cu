// Block sum with a while loop over the stride and the block's sync() method.
#include <cooperative_groups.h>
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg in in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[cdiv(n, 256)]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void block_reduce(const float* in, float* out, int n) {
    auto block = cooperative_groups::this_thread_block();
    __shared__ float buf[256];
    const int t = threadIdx.x;
    const int i = blockIdx.x * blockDim.x + t;
    buf[t] = i < n ? in[i] : 0.0f;
    block.sync();
    int s = blockDim.x / 2;
    while (s > 0) {
        if (t < s) buf[t] += buf[t + s];
        block.sync();
        s >>= 1;
    }
    if (t == 0) out[blockIdx.x] = buf[0];
}
