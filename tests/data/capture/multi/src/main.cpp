// The host program: sizes, allocations and calls into the launchers of launch.cu.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>

void launch_scale_float(const float* x, float* y, int n, float alpha);
void launch_scale_double(const double* x, double* y, int n, float alpha);
void launch_smooth(float* pool, int n);
void launch_add_rows(float* acc, const float* x, int rows, int cols);

int main(int argc, char** argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 100000;
    int rows = 48, cols = 1000;
    int repeat = argc > 2 ? std::atoi(argv[2]) : 1;
    std::vector<float> hf(n, 1.5f);
    std::vector<double> hd(n, 2.5);
    float *xf, *yf, *pool, *acc, *m;
    double *xd, *yd;
    cudaMalloc(&xf, n * sizeof(float));
    cudaMalloc(&yf, n * sizeof(float));
    cudaMalloc(&xd, n * sizeof(double));
    cudaMalloc(&yd, n * sizeof(double));
    cudaMalloc(&pool, (2 * n + 4) * sizeof(float));
    cudaMalloc(&acc, cols * sizeof(float));
    cudaMalloc(&m, rows * cols * sizeof(float));
    cudaMemcpy(xf, hf.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(xd, hd.data(), n * sizeof(double), cudaMemcpyHostToDevice);
    cudaMemset(pool, 0, (2 * n + 4) * sizeof(float));
    cudaMemset(acc, 0, cols * sizeof(float));
    cudaMemset(m, 0, rows * cols * sizeof(float));
    cudaMemcpy(m, hf.data(), cols * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(pool, hf.data(), n * sizeof(float), cudaMemcpyHostToDevice);
    for (int r = 0; r < repeat; ++r) {
        launch_scale_float(xf, yf, n, 2.0f);
        launch_scale_double(xd, yd, n, 0.5f);
        launch_smooth(pool, n);
        launch_add_rows(acc, m, rows, cols);
    }
    float check = 0;
    cudaMemcpy(&check, yf, sizeof(float), cudaMemcpyDeviceToHost);
    cudaError_t err = cudaDeviceSynchronize();
    std::printf("y[0]=%g status=%s\n", check, cudaGetErrorString(err));
    return err == cudaSuccess ? 0 : 1;
}
