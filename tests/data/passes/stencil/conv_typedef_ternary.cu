// 3x3 convolution over a typedef'd element type, taps through a ternary, loop variables declared outside.
typedef float real;
#define MASK 3
// @cuda-agent sizes h=33 w=50 verify h=6,33 w=7,50
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y)) block=(8, 8)
// @cuda-agent arg src in float[h * w] uniform(-1, 1)
// @cuda-agent arg mask in float[9] uniform(-1, 1)
// @cuda-agent arg dst out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void conv3(const real* src, const real* mask, real* dst, int h, int w) {
    const int gx = blockIdx.x * blockDim.x + threadIdx.x;
    const int gy = blockIdx.y * blockDim.y + threadIdx.y;
    if (gy >= h) return;
    if (gx >= w) return;
    real acc = 0;
    int a, b;
    for (a = 0; a < MASK; ++a) {
        for (b = 0; b < MASK; ++b) {
            const int sy = gy - MASK / 2 + a;
            const int sx = gx - MASK / 2 + b;
            acc += mask[a * MASK + b] * ((sy >= 0 && sx >= 0 && sy < h && sx < w) ? src[sy * w + sx] : (real)0);
        }
    }
    dst[gy * w + gx] = acc;
}
