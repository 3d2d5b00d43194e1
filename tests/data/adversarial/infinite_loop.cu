// Bug: a spin-wait on a flag nobody sets.
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, int n) {
    volatile int* flag = reinterpret_cast<volatile int*>(c);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i == 0) {
        while (flag[0] != 0x12345678) {
        }
    }
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
