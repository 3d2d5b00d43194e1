// Bug: the tree reduction drops the barrier between steps, so warps read partial sums that other
// warps have not written yet (a shared-memory race).
extern "C" __global__ void block_sum(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float s[256];
    int i = blockIdx.x * 256 + threadIdx.x;
    s[threadIdx.x] = i < n ? x[i] : 0.0f;
    for (int step = 128; step > 0; step >>= 1) {
        if (threadIdx.x < step) {
            s[threadIdx.x] += s[threadIdx.x + step];
        }
    }
    if (threadIdx.x == 0) {
        out[blockIdx.x] = s[0];
    }
}
