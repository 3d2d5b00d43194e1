// tests/data/sandbox/block_sum.cu under a spec: per-block sums of 256 floats, the original for the
// shared-memory adversarial kernels (uninitialized_shared.cu, shared_race.cu).
// @cuda-agent sizes n=1<<20 verify n=1000,70001
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg x in float[n]
// @cuda-agent arg out out float[cdiv(n, 256)]
extern "C" __global__ void block_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (int step = 128; step > 0; step >>= 1) {
        if (threadIdx.x < step) {
            s[threadIdx.x] += s[threadIdx.x + step];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[blockIdx.x] = s[0];
    }
}
