// Cheat: remembers its first result in a device global and replays it on later calls
// ("result caching across calls"): fast when timed repeatedly, wrong on new inputs.
__device__ float remembered[1 << 22];
__device__ int remembered_n = -1;

extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    if (remembered_n == n) {
        c[i] = remembered[i];
        return;
    }
    float v = a[i] + b[i];
    c[i] = v;
    if (n <= (1 << 22)) {
        remembered[i] = v;
        __threadfence();
        if (i == n - 1) {
            remembered_n = n;
        }
    }
}
