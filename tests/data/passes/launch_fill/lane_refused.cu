// refused: the body reads threadIdx.x besides the loop over the rows
// The thread index is used again inside the loop (a lane-dependent scale).
// @cuda-agent sizes rows=50 cols=8 verify rows=9,50 cols=8,8
// @cuda-agent launch grid=1 block=32
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void lanes(const float* x, float* y, int rows, int cols) {
    for (int r = threadIdx.x; r < rows; r += blockDim.x) {
        float t = 0.0f;
        for (int c = 0; c < cols; ++c) t += x[r * cols + c];
        y[r] = t * threadIdx.x;
    }
}
