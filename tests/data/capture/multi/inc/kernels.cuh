// Kernels of a small multi-file program: defined in a header, launched from src/.
#pragma once

// y = alpha * x + shift, UNROLL elements per thread (instantiated for float and for double)
template <typename T, int UNROLL>
__global__ void scale_shift(const T* x, T* y, int n, float alpha, T shift) {
    int base = (blockIdx.x * blockDim.x + threadIdx.x) * UNROLL;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        int i = base + u;
        if (i < n) y[i] = static_cast<T>(alpha) * x[i] + shift;
    }
}

// three-point average over a padded row: called with pointers one element into their rows
__global__ void smooth3(const float* u, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = (u[i - 1] + u[i] + u[i + 1]) / 3.0f;
}

// accumulate rows into a histogram-like total (reads x, updates acc in place)
__global__ void add_rows(float* acc, const float* x, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y;
    if (c < cols && r < rows) atomicAdd(&acc[c], x[r * cols + c]);
}
