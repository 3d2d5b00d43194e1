// Bug: indexes with a stride far past the end of the allocation (illegal memory access).
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, int n) {
    long long i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i * (1LL << 28)] = a[i] + b[i];
    }
}
