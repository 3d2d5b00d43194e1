#include <cstdio>
#include "../kernels/ops.cuh"

typedef void (*axpy_fn)(int, float, const float*, float*);

static int cdiv(int a, int b) { return (a + b - 1) / b; }

int main(int argc, char** argv) {
    const int n = 1 << 20;
    const int threads = 128;
    float *x, *y;
    int* count;
    cudaMalloc((void**)&x, n * sizeof(float));
    cudaMalloc((void**)&y, n * sizeof(float));
    cudaMalloc((void**)&count, sizeof(int));
    cudaMemset(count, 0, sizeof(int));
    axpy_fn kernel = axpy;
    kernel<<<cdiv(n, threads), threads>>>(n, 3.0f, x, y);
    auto counter = &count_positive;
    counter<<<cdiv(n, 256), 256>>>(y, n, count);
    cudaDeviceSynchronize();
    return 0;
}
