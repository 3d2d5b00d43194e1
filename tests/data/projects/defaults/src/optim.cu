#include "adam.cuh"

struct AdamConfig {
    int block_size = 512;
};

void adam_update(float* param, const float* grad, float* m, float* v, int n, float lr = 1e-3f,
                 float beta1 = 0.9f, float beta2 = 0.999f, float eps = 1e-8f, int block_size = 512) {
    int grid = (n + block_size - 1) / block_size;
    adam_step<<<grid, block_size>>>(param, grad, m, v, n, lr, beta1, beta2, eps);
}

int main() {
    const int num_params = 3 * 1024 * 1024;
    float *p, *g, *m, *v;
    cudaMalloc(&p, num_params * sizeof(float));
    cudaMalloc(&g, num_params * sizeof(float));
    cudaMalloc(&m, num_params * sizeof(float));
    cudaMalloc(&v, num_params * sizeof(float));
    adam_update(p, g, m, v, num_params, 3e-4f);
    return 0;
}
