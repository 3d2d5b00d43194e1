// Gather: out[i] = table[idx[i]].
// @cuda-agent sizes n=1<<24 m=1<<20 verify n=1000,4097 m=100,1000
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg table in float[m] uniform(-1, 1)
// @cuda-agent arg idx in int[n] randint(0, m)
// @cuda-agent arg out out float[n]
// @cuda-agent arg n = n
__global__ void gather(const float* table, const int* idx, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = table[idx[i]];
}
