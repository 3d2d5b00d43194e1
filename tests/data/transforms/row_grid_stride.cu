// Row means and row maxima over grid-stride loops whose grid covers the rows in a quarter of the
// threads: each thread takes every grid-th row (Caffe's CUDA_KERNEL_LOOP spelled out).
// @cuda-agent sizes rows=301 cols=45 verify rows=5,301 cols=3,45
// @cuda-agent launch grid=cdiv(rows, 4 * block) block=64
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-5 rtol=1e-4
__global__ void row_mean_strided(const float* x, float* y, int rows, int cols) {
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += blockDim.x * gridDim.x) {
        float s = 0.0f;
        for (int j = 0; j < cols; ++j) s += x[(size_t)r * cols + j];
        y[r] = s / cols;
    }
}

// @cuda-agent sizes rows=301 cols=45 verify rows=5,301 cols=3,45
// @cuda-agent launch grid=cdiv(rows, 4 * block) block=64
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void row_max_strided(const float* x, float* y, int rows, int cols) {
    for (int r = threadIdx.x + blockDim.x * blockIdx.x; r < rows; r += gridDim.x * blockDim.x) {
        const float* row = x + (size_t)r * cols;
        float m = row[0];
        for (int j = 1; j < cols; j++) m = fmaxf(m, row[j]);
        y[r] = m;
    }
}

// Not a grid-stride loop over the rows: each block walks every row with its threads' stride.
// @cuda-agent sizes rows=301 cols=45 verify rows=5,301 cols=3,45
// @cuda-agent launch grid=cdiv(rows, 4 * block) block=64
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void row_sum_block_stride(const float* x, float* y, int rows, int cols) {
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += blockDim.x) {
        float s = 0.0f;
        for (int j = 0; j < cols; ++j) s += x[(size_t)r * cols + j];
        y[r] = s;
    }
}
