// Hillis-Steele with the temporary declared before the loop, guarded by if, doubling by *= 2, bound blockDim.x.
// @cuda-agent sizes n=3000 verify n=100,3000
// @cuda-agent launch grid=cdiv(n, 128) block=128
// @cuda-agent arg in in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[n]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void scan128(const float* in, float* out, int n) {
    __shared__ float s[128];
    unsigned int t = threadIdx.x;
    int g = blockIdx.x * blockDim.x + t;
    s[t] = (g < n) ? in[g] : 0.0f;
    __syncthreads();
    float tmp;
    for (unsigned int d = 1; d < blockDim.x; d *= 2) {
        if (t >= d) tmp = s[t - d];
        __syncthreads();
        if (t >= d) s[t] = s[t] + tmp;
        __syncthreads();
    }
    if (g < n) out[g] = s[t];
}
