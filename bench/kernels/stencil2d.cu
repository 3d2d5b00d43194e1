// Five-point Jacobi step on a 2-D grid; the border is copied through.
// @cuda-agent sizes h=4096 w=4096 verify h=5,70 w=9,130
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y)) block=(8, 8)
// @cuda-agent arg u in float[h * w] uniform(0, 1)
// @cuda-agent arg v out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
// @cuda-agent tolerance atol=1e-6 rtol=1e-5
__global__ void jacobi(const float* u, float* v, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int c = y * w + x;
    if (x == 0 || y == 0 || x == w - 1 || y == h - 1) {
        v[c] = u[c];
    } else {
        v[c] = 0.25f * (u[c - 1] + u[c + 1] + u[c - w] + u[c + w]);
    }
}
