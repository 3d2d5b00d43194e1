// A 5-point Laplacian on a launch written with constants (the grid does not follow the block):
// the spec's 16x16 block is kept, only the halo varies.
// @cuda-agent sizes h=40 w=50 verify h=5,40 w=9,50
// @cuda-agent launch grid=(cdiv(w, 16), cdiv(h, 16)) block=(16, 16)
// @cuda-agent arg u in float[h * w] uniform(-1, 1)
// @cuda-agent arg lap out float[h * w]
// @cuda-agent compare lap written
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void laplacian(const float* u, float* lap, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < 1 || y < 1 || x >= w - 1 || y >= h - 1) return;
    lap[y * w + x] = u[(y - 1) * w + x] + u[(y + 1) * w + x] + u[y * w + x - 1] + u[y * w + x + 1] - 4.0f * u[y * w + x];
}
