// C = A B in fp32, one thread per output, and a TF32-style rewrite: the inputs rounded to TF32
// (10 mantissa bits, as tensor cores read fp32 data) by `cvt.rna.tf32.f32`, products summed in fp32.
// @cuda-agent sizes n=512 verify n=33,100
// @cuda-agent launch grid=(cdiv(n, block_x), cdiv(n, block_y)) block=(16, 16)
// @cuda-agent arg A in float[n * n] uniform(-1, 1)
// @cuda-agent arg B in float[n * n] uniform(-1, 1)
// @cuda-agent arg C out float[n * n]
// @cuda-agent work flops=2*n*n*n
__global__ void matmul(const float* A, const float* B, float* C, int n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
        C[row * n + col] = acc;
    }
}

// The same kernel, under a spec that allows TF32 in rewrites.
// @cuda-agent sizes n=512 verify n=33,100
// @cuda-agent launch grid=(cdiv(n, block_x), cdiv(n, block_y)) block=(16, 16)
// @cuda-agent arg A in float[n * n] uniform(-1, 1)
// @cuda-agent arg B in float[n * n] uniform(-1, 1)
// @cuda-agent arg C out float[n * n]
// @cuda-agent work flops=2*n*n*n
// @cuda-agent precision allow=tf32
__global__ void matmul_tf32_ok(const float* A, const float* B, float* C, int n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) acc += A[row * n + k] * B[k * n + col];
        C[row * n + col] = acc;
    }
}

__device__ float to_tf32(float v) {
    unsigned int bits;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(bits) : "f"(v));
    return __uint_as_float(bits);
}

__global__ void matmul_tf32(const float* A, const float* B, float* C, int n) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row < n && col < n) {
        float acc = 0.0f;
        for (int k = 0; k < n; ++k) acc += to_tf32(A[row * n + k]) * to_tf32(B[k * n + col]);
        C[row * n + col] = acc;
    }
}
