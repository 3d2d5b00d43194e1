// A kernel with a compile-time size, overridable with -DN=...: each verification size is
// compiled with its own N (without that, n=97 would write 4096 elements).
#ifndef N
#define N 4096
#endif

// @cuda-agent sizes n=1<<20 verify n=97,1021
// @cuda-agent define N=n
// @cuda-agent arg out out float[n]
// @cuda-agent arg in in float[n]
__global__ void scale_fixed(float* out, const float* in)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) out[i] = 2.0f * in[i];
}
