// A box blur with the three things a rewrite must leave as the user wrote them: a typedef
// (`real`), macros (`RADIUS`, `AREA`) and a __device__ helper (`clamp01`, which the front end
// inlines to analyse the kernel: the diff must still call it).
typedef float real;
#define RADIUS 2
#define AREA ((2 * RADIUS + 1) * (2 * RADIUS + 1))

__device__ real clamp01(real v) {
    return fminf(fmaxf(v, 0.0f), 1.0f);
}

// @cuda-agent sizes h=37 w=45 verify h=5,37 w=9,45
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y)) block=(16, 16)
// @cuda-agent arg in in float[h * w] uniform(0, 1)
// @cuda-agent arg out out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
// @cuda-agent tolerance atol=1e-5 rtol=1e-5
__global__ void blur(const real* in, real* out, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    real acc = 0;
    for (int dy = -RADIUS; dy <= RADIUS; ++dy) {
        for (int dx = -RADIUS; dx <= RADIUS; ++dx) {
            int yy = y + dy, xx = x + dx;
            if (yy >= 0 && yy < h && xx >= 0 && xx < w) acc += in[yy * w + xx];
        }
    }
    real v = clamp01(acc / AREA);
    out[y * w + x] = v;
}
