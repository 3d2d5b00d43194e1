// composes: Vectorize + SharedHistogram
// A 64-bin histogram of small ints with global atomics: a grid-stride loop (the indirect access
// stays scalar), then the atomics privatised in shared memory per block.
// @cuda-agent sizes n=1<<24 verify n=999,4101
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg v in int[n] randint(0, 64)
// @cuda-agent arg bins inout unsigned int[64] const(0)
// @cuda-agent arg n = n
__global__ void hist64(const int* v, unsigned int* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[v[i] & 63], 1u);
}
