// Block maximum: the stride halves by `/= 2`, the thread index read directly, the shared size a macro.
#define THREADS 128
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 128) block=128
// @cuda-agent arg v in float[n] uniform(-100, 100)
// @cuda-agent arg out out float[cdiv(n, 128)]
// @cuda-agent arg n = n
__global__ void block_max(const float* v, float* out, int n) {
    __shared__ float m[THREADS];
    int i = blockIdx.x * THREADS + threadIdx.x;
    m[threadIdx.x] = i < n ? v[i] : -INFINITY;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s /= 2) {
        if (threadIdx.x < s) m[threadIdx.x] = fmaxf(m[threadIdx.x], m[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = m[0];
}
