// Histogram whose counter type is a typedef, the index declared before it is assigned.
typedef unsigned int count_t;
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg keys in int[n] randint(0, 128)
// @cuda-agent arg counts inout unsigned int[128] const(0)
// @cuda-agent arg n = n
__global__ void count_keys(const int* keys, count_t* counts, int n) {
    int i;
    i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&counts[keys[i] & 127], (count_t)1);
}
