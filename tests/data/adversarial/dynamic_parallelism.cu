// Dynamic parallelism: the launched kernel starts a child grid from device code.
// (Needs separate compilation: options -rdc=true.)
__global__ void vadd_child(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}

extern "C" __global__ void vadd(const float* a, const float* b, float* c, int n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        vadd_child<<<(n + 255) / 256, 256>>>(a, b, c, n);
    }
}
