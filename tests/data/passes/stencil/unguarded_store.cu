// A 2-D convolution whose output store has no bounds check (Learn-CUDA-Programming's
// convolution_kernel_v1): the grid covers the image exactly only in 16x16 blocks, so the sizes are
// multiples of 16 and the rewrite keeps the 16x16 block (a 32x8 block over cols=48 would store
// past the end of each row, where no thread of the original stores).
// @cuda-agent sizes rows=64 cols=96 fs=5 verify rows=32,48 cols=48,16
// @cuda-agent launch grid=(cdiv(cols, 16), cdiv(rows, 16)) block=(16, 16)
// @cuda-agent arg out out float[rows * cols]
// @cuda-agent arg in in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg filt in float[fs * fs] uniform(-1, 1)
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
// @cuda-agent arg fs = fs
__global__ void conv_unguarded_store(float* out, const float* in, const float* filt, int rows, int cols, int fs) {
    int x = blockDim.x * blockIdx.x + threadIdx.x;
    int y = blockDim.y * blockIdx.y + threadIdx.y;
    float acc = 0.f;
    for (int r = -fs / 2; r <= fs / 2; ++r) {
        for (int c = -fs / 2; c <= fs / 2; ++c) {
            int yy = y + r, xx = x + c;
            float v = (yy >= 0 && yy < rows && xx >= 0 && xx < cols) ? in[yy * cols + xx] : 0.f;
            acc += v * filt[(r + fs / 2) * fs + c + fs / 2];
        }
    }
    out[y * cols + x] = acc;
}
