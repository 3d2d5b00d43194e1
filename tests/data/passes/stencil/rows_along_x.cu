// A 5-point stencil over an h x w image whose rows run along threadIdx.x and columns along
// threadIdx.y (ParRes' `in[(i)*n+(j-1)]`): the access maps say the reads step by one along y.
// @cuda-agent sizes h=67 w=45 verify h=13,67 w=9,45
// @cuda-agent launch grid=(cdiv(h, block_x), cdiv(w, block_y)) block=(16, 16)
// @cuda-agent arg src in double[h * w] uniform(-1, 1)
// @cuda-agent arg dst inout double[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void star_rows_x(const double* src, double* dst, int h, int w) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int j = blockIdx.y * blockDim.y + threadIdx.y;
    if ((1 <= i) && (i < h - 1) && (1 <= j) && (j < w - 1)) {
        dst[i * w + j] += 0.5 * src[(i)*w + (j - 1)] - 0.5 * src[(i)*w + (j + 1)]
                        + 0.25 * src[(i - 1) * w + j] - 0.25 * src[(i + 1) * w + j];
    }
}
