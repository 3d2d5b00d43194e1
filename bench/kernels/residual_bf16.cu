// Residual add in bf16 (llm.c's residual_forward), one element per thread.
#include <cuda_bf16.h>
// @cuda-agent sizes N=1<<25 verify N=1000,4097
// @cuda-agent launch grid=cdiv(N, block) block=256
// @cuda-agent arg out out bfloat16[N]
// @cuda-agent arg inp1 in bfloat16[N] uniform(-1, 1)
// @cuda-agent arg inp2 in bfloat16[N] uniform(-1, 1)
// @cuda-agent arg N = N
// @cuda-agent tolerance atol=1e-2 rtol=1e-2
__global__ void residual_forward_bf16(__nv_bfloat16* out, const __nv_bfloat16* inp1, const __nv_bfloat16* inp2, int N) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) {
        out[idx] = __float2bfloat16(__bfloat162float(inp1[idx]) + __bfloat162float(inp2[idx]));
    }
}
