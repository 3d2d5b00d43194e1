// composes: SameLayoutReduction + WarpReduction
// Per-block maxima by an interleaved tree (NVIDIA's reduce0 shape, fmaxf): sequential addressing,
// then the last warp's steps as shuffles.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[cdiv(n, 256)]
// @cuda-agent arg n = n
__global__ void block_max(const float* x, float* out, int n) {
    __shared__ float m[256];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    m[tid] = i < n ? x[i] : -INFINITY;
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) m[tid] = fmaxf(m[tid], m[tid + s]);
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = m[0];
}
