// y += a * x in fp32 (y accumulates: an `inout` array restored before every timed launch), and a
// rewrite that computes through fp16 intermediates: 3 decimal digits where fp32 keeps 7.
#include <cuda_fp16.h>

// @cuda-agent sizes n=1<<22 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y inout float[n] uniform(-1, 1)
// @cuda-agent arg a = 2.5
__global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// The same kernel, under a spec that allows fp16 arithmetic in rewrites.
// @cuda-agent sizes n=1<<22 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y inout float[n] uniform(-1, 1)
// @cuda-agent arg a = 2.5
// @cuda-agent precision allow=fp16
__global__ void saxpy_fp16_ok(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void saxpy_half(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __half h = __hfma(__float2half(a), __float2half(x[i]), __float2half(y[i]));
        y[i] = __half2float(h);
    }
}
