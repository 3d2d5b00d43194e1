// Batched transpose [b][h][w] -> [b][w][h] (a 3-D permute), one element per thread, the batch over blockIdx.z.
// @cuda-agent sizes b=256 h=1024 w=1024 verify b=2,3 h=5,70 w=9,131
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y), b) block=(16, 16)
// @cuda-agent arg in in float[b * h * w] uniform(-1, 1)
// @cuda-agent arg out out float[b * h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void batched_transpose(const float* in, float* out, int h, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    size_t batch = (size_t)blockIdx.z * h * w;
    out[batch + (size_t)x * h + y] = in[batch + (size_t)y * w + x];
}
