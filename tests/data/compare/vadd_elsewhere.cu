// A rewrite kept in its own file, with its own helper of the same name as the original's.
typedef float real;

__device__ __forceinline__ real add2(real x, real y) { return x + y; }

__global__ void vadd_grid_stride(const real* a, const real* b, real* c, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        c[i] = add2(a[i], b[i]);
    }
}
