// Residual add in bf16 (llm.c): the element type behind `typedef __nv_bfloat16 floatX;`.
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;
// @cuda-agent sizes N=1<<24 verify N=1000,4097
// @cuda-agent launch grid=cdiv(N, block) block=256
// @cuda-agent arg out out bfloat16[N]
// @cuda-agent arg inp1 in bfloat16[N] uniform(-1, 1)
// @cuda-agent arg inp2 in bfloat16[N] uniform(-1, 1)
// @cuda-agent arg N = N
// @cuda-agent tolerance atol=1e-2 rtol=1e-2
__global__ void residual_forward_kernel(floatX* out, const floatX* inp1, const floatX* inp2, int N) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) {
        out[idx] = (floatX)((float)inp1[idx] + (float)inp2[idx]);
    }
}
