// GELU forward in bf16 over exactly grid x block elements (no bounds check: N is a multiple of the block).
#include <cuda_bf16.h>
#define GELU_SCALING_FACTOR 0.7978845608f
// @cuda-agent sizes N=1<<29 verify N=768,4096
// @cuda-agent launch grid=N / block block=256
// @cuda-agent require N % 256 == 0
// @cuda-agent arg out out bfloat16[N]
// @cuda-agent arg inp in bfloat16[N] uniform(-4, 4)
// @cuda-agent tolerance atol=2e-2 rtol=2e-2
__global__ void gelu_whole_grid(__nv_bfloat16* out, const __nv_bfloat16* inp) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float xi = __bfloat162float(inp[i]);
    float cube = 0.044715f * xi * xi * xi;
    out[i] = __float2bfloat16(0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube))));
}
