// origin: prateekshukla1108/kernels-project-popcorn, prefixsum.cu
// license: none stated in the repository; the kernel as upstream wrote it
// A thread per output sums in[0..tid] (an inclusive prefix at O(n^2)), guarded by tid < n.
// @cuda-agent sizes n=1<<16 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg d_in in int32[n] randint(-100, 100)
// @cuda-agent arg d_out out int32[n]
// @cuda-agent arg n = n
__global__ void naive_prefix_sum(int *d_in, int *d_out, int n) {
    int tid = threadIdx.x + blockIdx.x * blockDim.x;
    
    if (tid < n) {
        int sum = 0;
        for (int i = 0; i <= tid; i++) {
            sum += d_in[i];
        }
        d_out[tid] = sum;
    }
}
