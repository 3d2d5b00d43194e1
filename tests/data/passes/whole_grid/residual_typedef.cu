// Residual add over a typedef'd bf16 type (llm.c's floatX), block 128.
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;
// @cuda-agent sizes n=1<<20 verify n=512,1280
// @cuda-agent launch grid=n / block block=128
// @cuda-agent require n % 128 == 0
// @cuda-agent arg out out floatX[n]
// @cuda-agent arg a in floatX[n] uniform(-1, 1)
// @cuda-agent arg b in floatX[n] uniform(-1, 1)
// @cuda-agent tolerance atol=1e-2 rtol=1e-2
__global__ void residual(floatX* out, const floatX* a, const floatX* b) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = (floatX)((float)a[i] + (float)b[i]);
}
