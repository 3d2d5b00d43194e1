// The thread's x walks the input's rows: the read is contiguous along y and the write along x.
// @cuda-agent sizes n=30 m=70 verify n=3,30 m=33,70
// @cuda-agent launch grid=(cdiv(n, block_x), cdiv(m, block_y)) block=(16, 16)
// @cuda-agent arg src in double[n * m] uniform(-1, 1)
// @cuda-agent arg dst out double[n * m]
// @cuda-agent arg n = n
// @cuda-agent arg m = m
__global__ void flip(const double* src, double* dst, int n, int m) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    if (i < n) {
        if (j < m) {
            dst[j * n + i] = src[i * m + j];
        }
    }
}
