// A spec separated from its kernel by a #define: the kernel does not see it.
// @cuda-agent sizes n=1<<20
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
#define SCALE 2.0f
__global__ void scale2(const float* x, float* y, int n)
{
    // the @cuda-agent docs describe the grammar (prose, not a directive)
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = SCALE * x[i];
}
