// Transpose whose load uses the flat thread index `idx` rather than `in[r * W + c]`.
// @cuda-agent sizes H=2048 W=4096 verify H=31,64 W=33,70
// @cuda-agent launch grid=(cdiv(W, block_x), cdiv(H, block_y)) block=(32, 8)
// @cuda-agent arg in in float[H * W] uniform(-1, 1)
// @cuda-agent arg out out float[H * W]
// @cuda-agent arg H = H
// @cuda-agent arg W = W
__global__ void transpose_flat(const float* in, float* out, int H, int W) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int idx = r * W + c;
    if (r < H && c < W) out[c * H + r] = in[idx];
}
