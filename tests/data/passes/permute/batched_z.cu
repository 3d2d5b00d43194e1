// Batched transpose (a 3-D permute [b][h][w] -> [b][w][h]), the batch over blockIdx.z, size_t offsets.
// @cuda-agent sizes b=3 h=37 w=45 verify b=2,3 h=5,37 w=33,45
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y), b) block=(16, 16)
// @cuda-agent arg in in float[b * h * w] uniform(-1, 1)
// @cuda-agent arg out out float[b * h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void batched_transpose(const float* in, float* out, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    size_t plane = (size_t)blockIdx.z * h * w;
    if (x < w && y < h) out[plane + (size_t)x * h + y] = in[plane + (size_t)y * w + x];
}
