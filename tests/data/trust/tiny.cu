// Outputs of magnitude 1e-7: an absolute tolerance of 1e-5 would swallow the whole signal.
// @cuda-agent sizes n=1<<20 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[n]
__global__ void scale_tiny(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * 1e-7f;
}

// Writes every output, all zeros.
__global__ void scale_tiny_zeros(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 0.0f;
}

// An honest rewrite: a division instead of a product, off by at most an ulp.
__global__ void scale_tiny_div(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] / 1e7f;
}

// The same kernel under a loose absolute tolerance: the no-signal check still refuses zeros.
// @cuda-agent sizes n=1<<20 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[n]
// @cuda-agent tolerance atol=1e-5 rtol=1e-5
__global__ void scale_tiny_loose(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] * 1e-7f;
}
