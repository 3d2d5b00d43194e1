// refused: is not guarded by `x < X && y < Y`
// A transpose with only the column checked.
// @cuda-agent sizes h=32 w=30 verify h=32,32 w=9,30
// @cuda-agent launch grid=(cdiv(w, block_x), h / block_y) block=(16, 16)
// @cuda-agent arg in in float[h * w] uniform(-1, 1)
// @cuda-agent arg out out float[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void half_guarded(const float* in, float* out, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w) out[x * h + y] = in[y * w + x];
}
