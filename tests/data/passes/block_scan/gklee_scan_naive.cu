// origin: Geof23/Gklee, Gklee/CUDA/Benchmarks/Table-1/SDK2.0/scan_t/scan_naive_kernel.cu, commit c6f1e0a2b3d5df5c137e19760432937672bc4e77
// license: NVIDIA CUDA SDK 2.0 sample notice (Copyright 1993-2009 NVIDIA Corporation), kept as a test
// fixture; the kernel as upstream wrote it, its file-scope `__extern__shared__ float temp[];` (a
// Gklee spelling) declared as `extern __shared__` at the top of the kernel.
// The SDK's naive scan: double-buffered (pout = 1 - pout), copy then add, the barrier first.
// @cuda-agent sizes n=1024 verify n=100,512
// @cuda-agent launch grid=1 block=n smem=2*n*4
// @cuda-agent arg g_odata out float[n]
// @cuda-agent arg g_idata in float[n] uniform(-1, 1)
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void scan_naive(float *g_odata, float *g_idata, int n)
{
    // Dynamically allocated shared memory for scan kernels
    extern __shared__ float temp[];

    int thid = threadIdx.x;

    int pout = 0;
    int pin = 1;

    // Cache the computational window in shared memory
    temp[pout*n + thid] = (thid > 0) ? g_idata[thid-1] : 0;

    for (int offset = 1; offset < n; offset *= 2)
    {
        pout = 1 - pout;
        pin  = 1 - pout;
        __syncthreads();

        temp[pout*n+thid] = temp[pin*n+thid];

        if (thid >= offset)
            temp[pout*n+thid] += temp[pin*n+thid - offset];
    }

    __syncthreads();

    g_odata[thid] = temp[pout*n+thid];
}
