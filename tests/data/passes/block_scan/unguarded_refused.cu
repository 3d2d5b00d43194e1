// refused: is read without `tid >= offset`
// The read at tid - offset is not guarded (it reads before the array for the first threads).
// @cuda-agent sizes n=1000 verify n=100,1000
// @cuda-agent launch grid=cdiv(n, 128) block=128
// @cuda-agent arg in in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[n]
// @cuda-agent arg n = n
__global__ void bad_scan(const float* in, float* out, int n) {
    __shared__ float buf[160];
    int i = blockIdx.x * 128 + threadIdx.x;
    buf[threadIdx.x + 32] = i < n ? in[i] : 0.0f;
    __syncthreads();
    for (int offset = 1; offset < 128; offset <<= 1) {
        float add = buf[threadIdx.x - offset];
        __syncthreads();
        buf[threadIdx.x] += add;
        __syncthreads();
    }
    if (i < n) out[i] = buf[threadIdx.x];
}
