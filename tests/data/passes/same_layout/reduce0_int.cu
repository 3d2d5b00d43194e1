// origin: zhyma/parallel_reduction, reduce_1_3.h, commit 03daca0fd890c59b981067b23857c4c8450027b4
// license: none stated in the repository; the kernel as upstream wrote it
// @cuda-agent sizes n=1<<22 verify n=1024,4096
// @cuda-agent launch grid=cdiv(n, 128) block=128 smem=128*4
// @cuda-agent arg g_odata out int32[cdiv(n, 128)]
// @cuda-agent arg g_idata in int32[n] randint(-100, 100)
// @cuda-agent arg n = n
__global__ void reduce0(int* g_odata, int* g_idata, int n)
{
    extern __shared__ int sdata[];

    // each thread loads one element from global to shared mem
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

    // write result for this block to global mem
    if (tid == 0)
        g_odata[blockIdx.x] = sdata[0];
    
}
