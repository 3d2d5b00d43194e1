// 256-bin histogram of byte values stored as ints, global atomics.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg data in int[n] randint(0, 256)
// @cuda-agent arg hist inout unsigned int[256] const(0)
// @cuda-agent arg n = n
__global__ void histogram(const int* data, unsigned int* hist, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&hist[data[i] & 255], 1u);
    }
}
