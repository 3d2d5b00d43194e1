// origin: amosyou/cuda_learning, day003/matmul.cu
// license: none stated in the repository; the kernel as upstream wrote it
// @cuda-agent sizes Width=1024 verify Width=17,70
// @cuda-agent launch grid=(cdiv(Width, block_x), cdiv(Width, block_y)) block=(16, 16)
// @cuda-agent arg M in float[Width * Width] uniform(-1, 1)
// @cuda-agent arg N in float[Width * Width] uniform(-1, 1)
// @cuda-agent arg P out float[Width * Width]
// @cuda-agent arg Width = Width
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__
void matrixMulKernel(float* M, float* N, float* P, int Width) {
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    // row and col thread indices are also the indices for P matrix

    // for a 4x4 matrix P
    // Width = 4
    // BLOCK_SIZE = 2

    if ((row < Width) && (col < Width)) {
        float Pvalue = 0;
        for (int k = 0; k < Width; k++) {
            Pvalue += M[row * Width + k] * N[k * Width + col];
        }
        P[row * Width + col] = Pvalue;
    }
}
