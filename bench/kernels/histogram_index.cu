// Histogram as tutorials write it: the bin is an element of the input, `atomicAdd(&(y[a[i]]), 1)`.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg a in int[n] randint(0, 256)
// @cuda-agent arg y inout int[256] const(0)
// @cuda-agent arg n = n
__global__ void histogram_index(const int* a, int* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        atomicAdd(&(y[a[i]]), 1);
    }
}
