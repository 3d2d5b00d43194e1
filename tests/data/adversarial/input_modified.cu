// Cheat: consumes its input (zeroes `a` after use), so a second call would see different data.
extern "C" __global__ void vadd(float* a, const float* __restrict__ b, float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
        a[i] = 0.0f;
    }
}
