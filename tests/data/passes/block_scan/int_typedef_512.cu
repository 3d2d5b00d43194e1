// Integer prefix sums over a typedef'd type in blocks of 512, the read into a local with a ternary.
typedef int count_t;
// @cuda-agent sizes n=2000 verify n=511,2000
// @cuda-agent launch grid=cdiv(n, 512) block=512
// @cuda-agent arg in in int32[n] randint(0, 10)
// @cuda-agent arg out out int32[n]
// @cuda-agent arg n = n
__global__ void count_scan(const count_t* in, count_t* out, int n) {
    __shared__ count_t buf[512];
    const int i = blockIdx.x * 512 + threadIdx.x;
    buf[threadIdx.x] = i < n ? in[i] : 0;
    __syncthreads();
    for (int off = 1; off < 512; off <<= 1) {
        count_t add = 0;
        if (off <= threadIdx.x) add = buf[threadIdx.x - off];
        __syncthreads();
        buf[threadIdx.x] += add;
        __syncthreads();
    }
    if (i < n) out[i] = buf[threadIdx.x];
}
