// A row norm with a typedef (`real`), macros (`SCALE`, `EPS`) and __device__ helpers (`square`, used in
// the reduction, and `finish`, assigned from: the front end inlines it): each rewrite keeps them.
typedef float real;
#define SCALE 0.5f
#define EPS 1e-6f

__device__ real square(real v) { return v * v; }

__device__ real finish(real s) {
    return sqrtf(s) * SCALE;
}

// @cuda-agent sizes rows=4096 cols=1024 verify rows=3,33 cols=17,1000
// @cuda-agent launch grid=cdiv(rows, block) block=128
// @cuda-agent arg x in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg out out float[rows]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void row_norm(const real* x, real* out, int rows, int cols) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    real s = 0;
    for (int c = 0; c < cols; ++c) s += square(x[r * cols + c]);
    real n = finish(s + EPS);
    out[r] = n;
}
