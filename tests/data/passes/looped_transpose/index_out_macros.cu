// repository: throwaway93/slate-pre
// path: benchmarks/transpose2/transpose.cu (transposeNaive)
// commit: b198c0aaea88ae465bc6eb4dab3e6819745ab6c7
// license: none stated upstream (kept as a test's example of the spelling)
// Offsets built from macros before the loop; the loop walks the tile's rows by `i * width`.
#define TILE_DIM    16
#define BLOCK_ROWS  16

#define FLOOR(a,b) (a-(a%b))

// @cuda-agent sizes width=1024 height=768 verify width=48 height=80
// @cuda-agent launch grid=(width / TILE_DIM, height / TILE_DIM) block=(TILE_DIM, BLOCK_ROWS)
// @cuda-agent arg odata out float[width * height]
// @cuda-agent arg idata in float[width * height] uniform(-1, 1)
// @cuda-agent arg width = width
// @cuda-agent arg height = height
__global__ void transposeNaive(float* odata, float* idata, int width, int height)
{
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;

    int index_in  = xIndex + width * yIndex;
    int index_out = yIndex + height * xIndex;

    for (int i=0; i<TILE_DIM; i+=BLOCK_ROWS)
    {
        odata[index_out+i] = idata[index_in+i*width];
    }
}
