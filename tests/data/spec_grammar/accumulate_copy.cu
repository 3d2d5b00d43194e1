// acc starts as a copy of x (a residual-style update): acc[i] += x[i] doubles x.
// @cuda-agent sizes n=1<<20
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg acc inout float[n] copy(x)
// @cuda-agent arg x in float[n]
// @cuda-agent require n % 32 == 0 && pow2(block)
__global__ void accumulate(float* acc, const float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) acc[i] += x[i];
}

// A rewrite that is right only when acc starts as a copy of x.
__global__ void accumulate_doubled(float* acc, const float* x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) acc[i] = 2.0f * x[i];
}
