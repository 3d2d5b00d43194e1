// No expected/ folder: this project shows the per-field fallback (the grid and the shared
// memory come from a library the inference cannot read; everything else is read).
#include "kernels/shift.cuh"
#include "launch_config.h"

int main() {
    const int n = 100000;
    const int threads = 128;
    float *a, *b;
    cudaMalloc(&a, n * sizeof(float));
    cudaMalloc(&b, n * sizeof(float));
    shift_scale<<<grid_for(n), threads, staging_bytes(threads)>>>(b, a, n, 2.5f);
    return 0;
}
