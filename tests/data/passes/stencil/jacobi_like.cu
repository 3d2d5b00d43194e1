// A cross-shaped stencil without loops: four guarded neighbours and the centre (size_t indices).
// @cuda-agent sizes h=41 w=67 verify h=5,41 w=9,67
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y)) block=(32, 4)
// @cuda-agent arg u in float[h * w] uniform(0, 1)
// @cuda-agent arg v out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void cross(const float* u, float* v, int h, int w) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= w || j >= h) return;
    float c = u[(size_t)j * w + i];
    float l = i > 0 ? u[(size_t)j * w + i - 1] : 0.0f;
    float r = i + 1 < w ? u[(size_t)j * w + i + 1] : 0.0f;
    float t = j > 0 ? u[(size_t)(j - 1) * w + i] : 0.0f;
    float b = j + 1 < h ? u[(size_t)(j + 1) * w + i] : 0.0f;
    v[(size_t)j * w + i] = 0.5f * c + 0.125f * (l + r + t + b);
}
