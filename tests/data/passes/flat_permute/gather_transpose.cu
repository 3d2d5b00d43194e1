// The transpose written from the output's side: each thread writes `out[tid]` and gathers its
// element with `tid % rows` and `tid / rows` (the read is strided).
#define THREADS 512
// @cuda-agent sizes rows=2048 cols=1536 verify rows=33 cols=19 verify rows=4 cols=7
// @cuda-agent launch grid=cdiv(rows * cols, THREADS) block=THREADS
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent arg input in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg output out float[rows * cols]
__global__ void TransposeKernel(const int rows, const int cols, const float* input, float* output)
{
    const int tid = blockDim.x * blockIdx.x + threadIdx.x;

    if (tid >= (rows * cols))
        return;

    const int row = tid % rows;
    const int col = tid / rows;

    output[tid] = input[row * cols + col];
}
