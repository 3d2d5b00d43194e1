// Scatter-add of integer counts: bins[key[i]] += weight[i] (integer atomics, so the result
// does not depend on the order of the additions).
// @cuda-agent sizes n=1<<24 m=4096 verify n=1000,4097 m=7,64
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg key in int[n] randint(0, m)
// @cuda-agent arg weight in int[n] randint(0, 10)
// @cuda-agent arg bins inout int[m] const(0)
// @cuda-agent arg n = n
__global__ void scatter_add(const int* key, const int* weight, int* bins, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[key[i]], weight[i]);
}
