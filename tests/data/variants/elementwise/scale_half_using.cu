// Scale in half precision with a `using` alias and an early return.
#include <cuda_fp16.h>
using half_t = __half;
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg x in float16[n] uniform(-1, 1)
// @cuda-agent arg y out float16[n]
// @cuda-agent arg alpha = 0.5
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-3 rtol=1e-3
__global__ void scale_half(const half_t* x, half_t* y, float alpha, int n) {
    const int i = threadIdx.x + blockDim.x * blockIdx.x;
    if (i >= n) return;
    y[i] = __float2half(alpha * __half2float(x[i]));
}
