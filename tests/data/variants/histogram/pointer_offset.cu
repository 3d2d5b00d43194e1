// Byte histogram with the atomic's address written as `hist + bin`.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg data in unsigned char[n] randint(0, 256)
// @cuda-agent arg hist inout unsigned int[256] const(0)
// @cuda-agent arg n = n
__global__ void histo_kernel(const unsigned char* data, unsigned int* hist, long n) {
    long i = threadIdx.x + (long)blockIdx.x * blockDim.x;
    if (i < n) {
        unsigned int bin = data[i];
        atomicAdd(hist + bin, 1u);
    }
}
