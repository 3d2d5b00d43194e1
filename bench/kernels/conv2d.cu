// 2-D convolution of an image with a 17x17 filter, zero padding ("same" size), one thread per pixel.
#define FILTER_RADIUS 8
#define FILTER_WIDTH (2 * FILTER_RADIUS + 1)
// @cuda-agent sizes h=4096 w=4096 verify h=5,70 w=9,131
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y)) block=(16, 16)
// @cuda-agent arg img in float[h * w] uniform(-1, 1)
// @cuda-agent arg filt in float[17 * 17] uniform(-1, 1)
// @cuda-agent arg out out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void conv2d(const float* img, const float* filt, float* out, int h, int w) {
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col >= w || row >= h) return;
    float acc = 0.0f;
    for (int fy = 0; fy < FILTER_WIDTH; ++fy) {
        for (int fx = 0; fx < FILTER_WIDTH; ++fx) {
            int y = row + fy - FILTER_RADIUS;
            int x = col + fx - FILTER_RADIUS;
            if (y >= 0 && y < h && x >= 0 && x < w) {
                acc += filt[fy * FILTER_WIDTH + fx] * img[y * w + x];
            }
        }
    }
    out[row * w + col] = acc;
}
