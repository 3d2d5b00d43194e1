// Launchers in their own translation unit.
#include "kernels.cuh"

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

void launch_scale_float(const float* x, float* y, int n, float alpha) {
    const int block = 128;
    scale_shift<float, 4><<<CEIL_DIV(n, block * 4), block>>>(x, y, n, alpha, 0.25f);
}

void launch_scale_double(const double* x, double* y, int n, float alpha) {
    scale_shift<double, 2><<<CEIL_DIV(n, 64 * 2), 64>>>(x, y, n, alpha, -1.0);
}

void launch_smooth(float* pool, int n) {
    // one allocation: the input row (n + 2 with its halo) then the output row
    float* u = pool;
    float* out = pool + n + 2;
    smooth3<<<CEIL_DIV(n, 256), 256>>>(u + 1, out + 1, n);
}

void launch_add_rows(float* acc, const float* x, int rows, int cols) {
    dim3 block(32, 1);
    dim3 grid(CEIL_DIV(cols, 32), rows);
    add_rows<<<grid, block>>>(acc, x, rows, cols);
}
