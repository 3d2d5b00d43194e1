// 3x3 box filter over a planar 3-channel 8-bit image (channels x height x width), one thread per
// pixel on a 3-D grid (the channel is blockIdx.z); the border is clamped.
// @cuda-agent sizes c=3 h=2048 w=2048 verify c=3,1 h=33,70 w=100,9
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y), c) block=(32, 8)
// @cuda-agent arg img in uint8_t[c * h * w] randint(0, 256)
// @cuda-agent arg out out uint8_t[c * h * w]
// @cuda-agent arg c = c
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void box_filter(const unsigned char* img, unsigned char* out, int c, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int ch = blockIdx.z;
    if (x >= w || y >= h || ch >= c) return;
    const unsigned char* plane = img + (size_t)ch * h * w;
    int sum = 0;
    for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
            int yy = min(max(y + dy, 0), h - 1);
            int xx = min(max(x + dx, 0), w - 1);
            sum += plane[yy * w + xx];
        }
    }
    out[(size_t)ch * h * w + y * w + x] = (unsigned char)((sum + 4) / 9);
}
