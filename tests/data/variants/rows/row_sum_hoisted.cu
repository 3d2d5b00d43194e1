// Row sums in C89 style: the loop variable and the accumulator declared at the top of the kernel.
// @cuda-agent sizes rows=8192 cols=1024 verify rows=7,40 cols=3,129
// @cuda-agent launch grid=cdiv(rows, block) block=128
// @cuda-agent arg a in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg sums out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void row_sums(const float* a, float* sums, int rows, int cols) {
    int r, j;
    float acc;
    r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        acc = 0.0f;
        for (j = 0; j < cols; j++) acc += a[r * cols + j];
        sums[r] = acc;
    }
}
