// A thread-per-row kernel whose rows also add into grid-wide results atomically (as HeCBench's
// attention_kernel1 adds each row's exp into one sum): a bare pointer, `&a[k]`, and `p + k` at an
// index the row computes, under an `if` whose `else` must stay its own.  Each row makes the same atomic updates after the row-parallel rewrite,
// from one lane.
// @cuda-agent sizes rows=37 cols=45 verify rows=5,37 cols=3,45
// @cuda-agent launch grid=cdiv(rows, block) block=64
// @cuda-agent arg x in float[rows * cols] uniform(-0.1, 0.1)
// @cuda-agent arg w in float[cols] uniform(-1, 1)
// @cuda-agent arg y out float[rows]
// @cuda-agent arg total inout float[1] const(0)
// @cuda-agent arg signs inout int[2] const(0)
// @cuda-agent arg parts inout float[4] const(0)
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-5 rtol=1e-4
__global__ void row_atomic(const float* x, const float* w, float* y, float* total, int* signs, float* parts,
                           int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        float s = 0.0f;
        for (int j = 0; j < cols; ++j) s += x[r * cols + j] * w[j];
        y[r] = s;
        atomicAdd(total, s);
        if (s > 0.0f) atomicAdd(&signs[1], 1);
        else atomicAdd(signs, 1);
        atomicAdd(parts + r % 4, expf(s));
    }
}
