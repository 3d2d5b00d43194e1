// Compiles only with -DSCALE=... (a build configuration the user passes with -D).
// @cuda-agent sizes n=1<<20
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
__global__ void scaled(const float* x, float* y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = SCALE * x[i];
}
