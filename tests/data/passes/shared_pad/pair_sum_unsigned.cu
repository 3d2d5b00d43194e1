// Each thread adds a pair of neighbours staged in shared memory: s[2 * t] and s[2 * t + 1], two
// elements apart from one thread to the next (a 2-way bank conflict), unsigned elements.
// @cuda-agent sizes n=65536 verify n=1024,2560
// @cuda-agent launch grid=cdiv(n, 256) block=128
// @cuda-agent arg a in uint32[n] randint(0, 1000)
// @cuda-agent arg b out uint32[cdiv(n, 256) * 128]
// @cuda-agent require n % 256 == 0
__global__ void pair_sum(const unsigned* a, unsigned* b) {
    __shared__ unsigned s[256];
    const unsigned t = threadIdx.x, base = blockIdx.x * 256;
    s[t] = a[base + t];
    s[t + 128] = a[base + t + 128];
    __syncthreads();
    b[blockIdx.x * 128 + t] = s[2 * t] + s[2 * t + 1];
}
