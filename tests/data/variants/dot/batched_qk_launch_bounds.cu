// Batched Q K^T (one batch per blockIdx.z) with __launch_bounds__ for the 16x16 block it was
// written for and the per-batch pointers as aliases.
// @cuda-agent sizes B=8 T=512 D=64 verify B=2,3 T=17,40 D=9,33
// @cuda-agent launch grid=(cdiv(T, block_x), cdiv(T, block_y), B) block=(16, 16)
// @cuda-agent arg S out float[B * T * T]
// @cuda-agent arg Q in float[B * T * D] uniform(-1, 1)
// @cuda-agent arg K in float[B * T * D] uniform(-1, 1)
// @cuda-agent arg T = T
// @cuda-agent arg D = D
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__ void __launch_bounds__(256) batched_qk(float* S, const float* Q, const float* K, int T, int D) {
    const int b = blockIdx.z;
    const int t = blockIdx.y * blockDim.y + threadIdx.y;
    const int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T || s >= T) return;
    const float* q = Q + (size_t)b * T * D + (size_t)t * D;
    const float* k = K + (size_t)b * T * D + (size_t)s * D;
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) dot += q[d] * k[d];
    S[((size_t)b * T + t) * T + s] = dot;
}
