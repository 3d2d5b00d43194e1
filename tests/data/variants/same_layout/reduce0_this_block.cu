// Interleaved max tree with this_thread_block().sync() and a constexpr shared size.
#include <cooperative_groups.h>
constexpr int THREADS = 256;
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg v in float[n] uniform(-100, 100)
// @cuda-agent arg best out float[cdiv(n, 256)]
// @cuda-agent arg n = n
__global__ void block_max(const float* v, float* best, int n) {
    __shared__ float smax[THREADS];
    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    smax[tid] = i < n ? v[i] : -INFINITY;
    cooperative_groups::this_thread_block().sync();
    for (int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) smax[tid] = fmaxf(smax[tid], smax[tid + s]);
        cooperative_groups::this_thread_block().sync();
    }
    if (tid == 0) best[blockIdx.x] = smax[0];
}
