// Naive transpose as in NVIDIA's transpose sample: the block is TILE_DIM x TILE_DIM and the
// indices are written with the macro instead of blockDim.
#define TILE_DIM 16
// @cuda-agent sizes width=2048 height=2048 verify width=16,48 height=32,80
// @cuda-agent launch grid=(cdiv(width, 16), cdiv(height, 16)) block=(16, 16)
// @cuda-agent arg odata out float[width * height]
// @cuda-agent arg idata in float[width * height] uniform(-1, 1)
// @cuda-agent arg width = width
// @cuda-agent arg height = height
__global__ void transposeNaive(float* odata, const float* idata, int width, int height) {
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;
    if (xIndex < width && yIndex < height) {
        int index_in = xIndex + width * yIndex;
        int index_out = yIndex + height * xIndex;
        odata[index_out] = idata[index_in];
    }
}
