// ReLU on doubles, one element per thread, 64 threads per block.
// @cuda-agent sizes n=1<<24 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=64
// @cuda-agent arg x in double[n] uniform(-1, 1)
// @cuda-agent arg y out double[n]
// @cuda-agent arg n = n
__global__ void relu(const double* x, double* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.0 ? x[i] : 0.0;
}
