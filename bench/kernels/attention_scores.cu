// Causal attention scores: preatt[bh, t, t2] = scale * q[bh, t, :] . k[bh, t2, :] for t2 <= t and
// -INFINITY above the diagonal; one output per thread, one (batch, head) per blockIdx.z.
#include <math.h>
// @cuda-agent sizes bh=96 t=1024 hs=64 verify bh=2,3,1 t=33,70,128 hs=5,24,64
// @cuda-agent launch grid=(cdiv(t, block_x), cdiv(t, block_y), bh) block=(16, 16)
// @cuda-agent arg preatt out float[bh * t * t]
// @cuda-agent arg q in float[bh * t * hs] uniform(-1, 1)
// @cuda-agent arg k in float[bh * t * hs] uniform(-1, 1)
// @cuda-agent arg T = t
// @cuda-agent arg HS = hs
// @cuda-agent arg scale = 0.125
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
// @cuda-agent work flops=bh*t*(t+1)*hs
__global__ void attention_scores(float* preatt, const float* q, const float* k, int T, int HS, float scale) {
    int t2 = blockIdx.x * blockDim.x + threadIdx.x;
    int t = blockIdx.y * blockDim.y + threadIdx.y;
    int bh = blockIdx.z;
    if (t >= T || t2 >= T) return;
    if (t2 > t) {
        preatt[(bh * T + t) * T + t2] = -INFINITY;
        return;
    }
    float val = 0.0f;
    for (int i = 0; i < HS; i++) {
        val += q[(bh * T + t) * HS + i] * k[(bh * T + t2) * HS + i];
    }
    preatt[(bh * T + t) * T + t2] = val * scale;
}
