// Layer norm with a block per row striding over rows on a fixed grid of 4 blocks (shared-memory sums).
// @cuda-agent sizes rows=37 cols=300 verify rows=5,37 cols=64,300
// @cuda-agent launch grid=4 block=64
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-5 rtol=1e-4
__global__ void layernorm_rows(const float* x, float* y, int rows, int cols) {
    __shared__ float part[64];
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        float s = 0.0f;
        for (int j = threadIdx.x; j < cols; j += blockDim.x) s += x[r * cols + j];
        part[threadIdx.x] = s;
        __syncthreads();
        for (int k = 32; k > 0; k >>= 1) {
            if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
            __syncthreads();
        }
        float mean = part[0] / cols;
        __syncthreads();
        for (int j = threadIdx.x; j < cols; j += blockDim.x) y[r * cols + j] = x[r * cols + j] - mean;
    }
}
