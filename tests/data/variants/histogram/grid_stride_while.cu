// Histogram over a grid-stride while loop (CUDA by Example).
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=min(cdiv(n, block), 1024) block=256
// @cuda-agent arg buffer in int[n] randint(0, 256)
// @cuda-agent arg histo inout unsigned int[256] const(0)
// @cuda-agent arg size = n
__global__ void histo_stride(const int* buffer, unsigned int* histo, int size) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    int offset = blockDim.x * gridDim.x;
    while (i < size) {
        atomicAdd(&histo[buffer[i]], 1u);
        i += offset;
    }
}
