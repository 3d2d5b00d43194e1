// 5x5 convolution, body wrapped in the bounds check, literal filter size, taps inline.
// @cuda-agent sizes h=37 w=45 verify h=5,37 w=9,45
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y)) block=(16, 16)
// @cuda-agent arg in in float[h * w] uniform(-1, 1)
// @cuda-agent arg k in float[25] uniform(-1, 1)
// @cuda-agent arg out out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void conv5(const float* in, const float* k, float* out, int h, int w) {
    int x = threadIdx.x + blockIdx.x * blockDim.x;
    int y = threadIdx.y + blockDim.y * blockIdx.y;
    if (x < w && y < h) {
        float s = 0.0f;
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 5; j++)
                if (0 <= y + i - 2 && y + i - 2 < h && x + j - 2 >= 0 && w > x + j - 2)
                    s += k[i * 5 + j] * in[(y + i - 2) * w + (x + j - 2)];
        out[y * w + x] = s;
    }
}
