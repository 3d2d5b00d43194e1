// y = A x with the row's dot product in a __device__ function.
__device__ float row_dot(const float* row, const float* v, int len) {
    float s = 0.0f;
    for (int k = 0; k < len; ++k) s += row[k] * v[k];
    return s;
}

// @cuda-agent sizes m=8192 n=1024 verify m=5,70 n=3,129
// @cuda-agent launch grid=cdiv(m, block) block=128
// @cuda-agent arg A in float[m * n] uniform(-1, 1)
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[m]
// @cuda-agent arg m = m
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void sgemv(const float* A, const float* x, float* y, int m, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < m) {
        y[i] = row_dot(A + (size_t)i * n, x, n);
    }
}
