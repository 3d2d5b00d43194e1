// Row softmax as a template over the element type, instantiated for float.
// @cuda-agent sizes rows=4096 cols=512 verify rows=5,37 cols=7,100
// @cuda-agent template float
// @cuda-agent launch grid=cdiv(rows, block) block=128
// @cuda-agent arg x in float[rows * cols] uniform(-5, 5)
// @cuda-agent arg y out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent tolerance atol=1e-6 rtol=1e-4
template <typename T>
__global__ void softmax_rows(const T* x, T* y, int rows, int cols) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r < rows) {
        const T* in = x + r * cols;
        T* out = y + r * cols;
        T m = in[0];
        for (int j = 1; j < cols; ++j) m = fmaxf(m, in[j]);
        T sum = 0;
        for (int j = 0; j < cols; ++j) sum += expf(in[j] - m);
        for (int j = 0; j < cols; ++j) out[j] = expf(in[j] - m) / sum;
    }
}
