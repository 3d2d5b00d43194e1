// A 3x3 box blur as a template over the element type: offsets from -1 to 1 (<=), guarded taps, a count of those in the image.
// @cuda-agent sizes h=23 w=41 verify h=4,23 w=9,41
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y)) block=(16, 8)
// @cuda-agent template float
// @cuda-agent arg in in float[h * w] uniform(0, 1)
// @cuda-agent arg out out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
template <typename T>
__global__ void box3(const T* in, T* out, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    T sum = 0;
    int count = 0;
    for (int dy = -1; dy <= 1; ++dy) {
        for (int dx = -1; dx <= 1; ++dx) {
            int yy = y + dy, xx = x + dx;
            if (yy >= 0 && yy < h && xx >= 0 && xx < w) {
                sum += in[yy * w + xx];
                count++;
            }
        }
    }
    out[y * w + x] = sum / count;
}
