#pragma once

__global__ void adam_step(float* param, const float* grad, float* m, float* v, int n, float lr, float beta1,
                          float beta2, float eps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float g = grad[i];
    m[i] = beta1 * m[i] + (1.0f - beta1) * g;
    v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
    param[i] -= lr * m[i] / (sqrtf(v[i]) + eps);
}
