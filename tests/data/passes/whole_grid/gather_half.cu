// A gather through an index stream into half precision (float table, int indices, half output).
#include <cuda_fp16.h>
// @cuda-agent sizes n=1<<20 m=1000 verify n=512,1024 m=100,1000
// @cuda-agent launch grid=n / block block=256
// @cuda-agent require n % 256 == 0
// @cuda-agent arg table in float[m] uniform(-1, 1)
// @cuda-agent arg idx in int32[n] randint(0, m)
// @cuda-agent arg out out float16[n]
// @cuda-agent tolerance atol=1e-3 rtol=1e-3
__global__ void gather_half(const float* table, const int* idx, __half* out) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = __float2half(table[idx[i]]);
}
