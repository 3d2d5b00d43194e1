// refused: already uses shared memory
// @cuda-agent sizes n=1000 verify n=13,1000
// @cuda-agent launch grid=cdiv(n, 128) block=128
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
__global__ void smooth(const float* x, float* y, int n) {
    __shared__ float s[130];
    int i = blockIdx.x * 128 + threadIdx.x;
    s[threadIdx.x + 1] = i < n ? x[i] : 0.0f;
    __syncthreads();
    if (i < n) y[i] = s[threadIdx.x + 1];
}
