// refused: adds to an element the step has not set
// origin: alchemz/cuda-expand-prefix-sum-calculation, cuda_scan.cu.cu (GPU Gems 3, ch. 39, as retyped there)
// license: none stated in the repository; the kernel as upstream wrote it but for two typos that
// do not compile (`int1 pout` -> `int pout`, `thid1` -> `thid`).  Both branches add into the new
// buffer (`+=`), which holds the values of two steps before: not a scan, and refused.
// @cuda-agent sizes n=256 verify n=64,128
// @cuda-agent launch grid=1 block=n smem=2*n*4
// @cuda-agent arg g_odata out float[n]
// @cuda-agent arg g_idata in float[n] uniform(-1, 1)
// @cuda-agent arg n = n
__global__ void scan(float *g_odata, float *g_idata, int n){
	extern __shared__ float temp[];
	int thid = threadIdx.x;
	int pout =0, pin=1;

	temp[pout*n + thid] = (thid >0) ? g_idata[thid-1] : 0;
	__syncthreads();

	for(int offset =1; offset < n; offset *=2){
		pout = 1 - pout;
		pin = 1- pout;
		if(thid >= offset)
			temp[pout*n + thid] += temp[pin*n + thid - offset];
		else
			temp[pout*n +thid] +=temp[pin*n + thid];
		__syncthreads();
	}
	g_odata[thid] = temp [pout*n + thid];
}
