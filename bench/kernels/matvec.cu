// y = A x, one thread per row of a row-major matrix.
// @cuda-agent sizes rows=16384 cols=4096 verify rows=7,100 cols=5,64
// @cuda-agent launch grid=cdiv(rows, block) block=256
// @cuda-agent arg A in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg x in float[cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__ void matvec(const float* A, const float* x, float* y, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float acc = 0.0f;
        for (int j = 0; j < cols; ++j) acc += A[(size_t)r * cols + j] * x[j];
        y[r] = acc;
    }
}
