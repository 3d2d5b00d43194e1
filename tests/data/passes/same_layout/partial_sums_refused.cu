// refused: is read after the loop elsewhere than `[0]`
// The interleaved tree of zhyma/parallel_reduction's reduce0 (reduce_1_3.h), changed here to also
// store every thread's partial sum: the two addressings leave different partial sums in sdata,
// so only a tree whose block result alone is read can change form.
// @cuda-agent sizes n=1<<20 verify n=1024,4096
// @cuda-agent launch grid=cdiv(n, 128) block=128 smem=128*4
// @cuda-agent arg g_odata out int32[n]
// @cuda-agent arg g_idata in int32[n] randint(-100, 100)
// @cuda-agent arg n = n
__global__ void reduce0_partials(int* g_odata, int* g_idata, int n)
{
    extern __shared__ int sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x*blockDim.x + threadIdx.x;
    sdata[tid] = g_idata[i];
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s *= 2)
    {
        if (tid % (2 * s) == 0)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    g_odata[i] = sdata[tid];
}
