// refused: is not at an offset of the thread
// A "valid" convolution: the input is larger than the output and the taps carry no bounds check.
// @cuda-agent sizes h=20 w=30 verify h=5,20 w=9,30
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y)) block=(16, 16)
// @cuda-agent arg in in float[(h + 2) * (w + 2)] uniform(-1, 1)
// @cuda-agent arg k in float[9] uniform(-1, 1)
// @cuda-agent arg out out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void valid3(const float* in, const float* k, float* out, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float s = 0.0f;
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) s += k[i * 3 + j] * in[(y + i) * (w + 2) + x + j];
    out[y * w + x] = s;
}
