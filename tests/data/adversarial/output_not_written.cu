// Cheat: skips one element in a thousand. A harness that reuses an output buffer still holding the
// baseline's results (or zeros that fall within a loose tolerance) would pass this.
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && i % 1000 != 999) {
        c[i] = a[i] + b[i];
    }
}
