// A 3-point smoothing of a padded row, as vendor stencils call it: `smooth3(u + 1, out + 1, n)`
// on buffers of n + 2 elements; the halo of `out` is never written.
// @cuda-agent sizes n=1<<22 verify n=97,1021
// @cuda-agent arg u in float[n + 2] offset=1
// @cuda-agent arg out out float[n + 2] offset=1
// @cuda-agent compare out where 1 <= i && i <= n
__global__ void smooth3(const float* u, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 0.25f * u[i - 1] + 0.5f * u[i] + 0.25f * u[i + 1];
}

// Also zeroes the halo (inside the allocation: no out-of-bounds write, and don't-care).
__global__ void smooth3_halo(const float* u, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 0.25f * u[i - 1] + 0.5f * u[i] + 0.25f * u[i + 1];
    if (i == 0) out[-1] = 0.0f;
    if (i == n - 1) out[n] = 0.0f;
}
