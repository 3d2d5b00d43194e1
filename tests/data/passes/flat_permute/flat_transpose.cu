// The transpose of issue 35's real-code list: each thread reads `in[idx]` flat and splits the
// index into row and column with `/` and `%`; the write is strided.
// @cuda-agent sizes R=1024 C=768 verify R=37 C=53 verify R=5 C=3
// @cuda-agent launch grid=cdiv(R * C, block) block=256
// @cuda-agent arg in in float[R * C] uniform(-1, 1)
// @cuda-agent arg out out float[R * C]
// @cuda-agent arg R = R
// @cuda-agent arg C = C
__global__ void transpose_flat(const float* in, float* out, int R, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < R * C) {
        int row = idx / C;
        int col = idx % C;
        out[col * R + row] = in[idx];
    }
}
