// refused: strides the threads an even number of elements apart
// Threads 33 elements apart (a padded row already): every thread of a warp is in a bank of its own.
// @cuda-agent sizes n=1024 verify n=64,96
// @cuda-agent launch grid=(n / 32, n / 32) block=(32, 32)
// @cuda-agent arg in in float[n * n] uniform(-1, 1)
// @cuda-agent arg out out float[n * n]
// @cuda-agent arg n = n
// @cuda-agent require n % 32 == 0
__global__ void transpose_padded(const float* in, float* out, int n) {
    __shared__ float tile[32 * 33];
    int tx = threadIdx.x, ty = threadIdx.y;
    tile[ty * 33 + tx] = in[(blockIdx.y * 32 + ty) * n + blockIdx.x * 32 + tx];
    __syncthreads();
    out[(blockIdx.x * 32 + ty) * n + blockIdx.y * 32 + tx] = tile[tx * 33 + ty];
}
