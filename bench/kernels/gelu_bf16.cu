// GELU forward in bf16 (llm.c style: float math on __nv_bfloat16 storage), one element per thread.
#include <cuda_bf16.h>
#define GELU_SCALING_FACTOR 0.7978845608f
// @cuda-agent sizes N=1<<25 verify N=1000,4097
// @cuda-agent launch grid=cdiv(N, block) block=256
// @cuda-agent arg out out bfloat16[N]
// @cuda-agent arg inp in bfloat16[N] uniform(-4, 4)
// @cuda-agent arg N = N
// @cuda-agent tolerance atol=2e-2 rtol=2e-2
__global__ void gelu_forward_bf16(__nv_bfloat16* out, const __nv_bfloat16* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float xi = __bfloat162float(inp[i]);
        float cube = 0.044715f * xi * xi * xi;
        out[i] = __float2bfloat16(0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube))));
    }
}
