// Row sums with a grid-stride loop on a fixed grid of 2 blocks (under-filled), inner body in braces.
// @cuda-agent sizes rows=500 cols=40 verify rows=9,500 cols=3,40
// @cuda-agent launch grid=2 block=64
// @cuda-agent arg x in double[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out double[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void rowsum(const double* x, double* y, int rows, int cols) {
    const int stride = blockDim.x * gridDim.x;
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
        double t = 0.0;
        for (int c = 0; c < cols; ++c) {
            t += x[(size_t)r * cols + c];
        }
        y[r] = t;
    }
}
