// NVIDIA's reduce2 (sequential addressing) as the samples write it: cooperative groups barriers.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg g_idata in float[n] uniform(-1, 1)
// @cuda-agent arg g_odata out float[cdiv(n, 256)]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void reduce2(const float* g_idata, float* g_odata, unsigned int n) {
    cg::thread_block cta = cg::this_thread_block();
    __shared__ float sdata[256];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0;
    cg::sync(cta);
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        cg::sync(cta);
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
