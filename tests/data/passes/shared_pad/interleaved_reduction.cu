// A tree reduction with interleaved addressing (Harris' reduction #2): thread t adds
// sdata[2 * s * t + s] into sdata[2 * s * t], threads 2s elements apart: a 2s-way bank conflict.
// @cuda-agent sizes n=1048576 verify n=1536,3840
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg g_idata in int[n] randint(-100, 100)
// @cuda-agent arg g_odata out int[cdiv(n, 256)]
// @cuda-agent arg n = n
__global__ void reduce_interleaved(const int* g_idata, int* g_odata, unsigned n) {
    __shared__ int sdata[256];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = i < n ? g_idata[i] : 0;
    __syncthreads();
    for (unsigned s = 1; s < blockDim.x; s *= 2) {
        unsigned index = 2 * s * tid;
        if (index < blockDim.x) sdata[index] += sdata[index + s];
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = sdata[0];
}
