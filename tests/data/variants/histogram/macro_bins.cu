// Histogram of ints into NUM_BINS bins, the bin count a macro.
#define NUM_BINS 64
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg values in int[n] randint(0, 1000)
// @cuda-agent arg bins inout int[64] const(0)
// @cuda-agent arg n = n
__global__ void histogram_bins(const int* values, int* bins, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        int b = values[idx] % NUM_BINS;
        atomicAdd(&bins[b], 1);
    }
}
