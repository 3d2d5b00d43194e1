// Per-block sum with interleaved addressing (the first kernel of NVIDIA's reduction sample):
// at step s, every thread whose index is a multiple of 2*s adds its neighbour s away.
// @cuda-agent sizes n=1<<26 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg g_idata in float[n] uniform(-1, 1)
// @cuda-agent arg g_odata out float[cdiv(n, 256)]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void reduce0(const float* g_idata, float* g_odata, unsigned int n) {
    __shared__ float sdata[256];
    // each thread loads one element from global to shared mem
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0.0f;
    __syncthreads();
    // do reduction in shared mem
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    // write result for this block to global mem
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
