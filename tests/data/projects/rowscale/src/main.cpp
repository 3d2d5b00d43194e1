#include <cuda_runtime.h>
#include <vector>
#include "rowscale.cuh"

static const unsigned ROWS = 512;
constexpr int COLS = 1000;

int main() {
    float *d_in, *d_out, *d_bias;
    cudaMalloc(reinterpret_cast<void**>(&d_in), ROWS * COLS * sizeof(float));
    cudaMalloc(reinterpret_cast<void**>(&d_out), ROWS * COLS * sizeof(float));
    cudaMalloc(reinterpret_cast<void**>(&d_bias), COLS * sizeof(float));
    dim3 b(32, 8);
    dim3 g(CEIL_DIV(COLS, b.x), CEIL_DIV(ROWS, b.y));
    scale_rows<<<g, b>>>(d_out, d_in, d_bias, ROWS, COLS, 0.5f);
    cudaDeviceSynchronize();
    std::printf("done\n");
    return 0;
}
