// LayerNorm forward statistics and output in the llm.c style: the element type behind a typedef,
// the epsilon a macro, the row pointer an alias, an early return.
#define EPS 1e-5f
typedef float floatX;
// @cuda-agent sizes B=2048 C=256 verify B=3,33 C=5,64
// @cuda-agent launch grid=cdiv(B, block) block=64
// @cuda-agent arg out out float[B * C]
// @cuda-agent arg inp in float[B * C] uniform(-2, 2)
// @cuda-agent arg weight in float[C] uniform(0.5, 1.5)
// @cuda-agent arg bias in float[C] uniform(-0.5, 0.5)
// @cuda-agent arg B = B
// @cuda-agent arg C = C
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void layernorm_forward_kernel1(floatX* out, const floatX* inp, const floatX* weight, const floatX* bias, int B, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B) return;
    const floatX* x = inp + idx * C;
    float m = 0.0f;
    for (int i = 0; i < C; i++) {
        m += x[i];
    }
    m = m / C;
    float v = 0.0f;
    for (int i = 0; i < C; i++) {
        float xshift = x[i] - m;
        v += xshift * xshift;
    }
    v = v / C;
    float s = 1.0f / sqrtf(v + EPS);
    floatX* out_idx = out + idx * C;
    for (int i = 0; i < C; i++) {
        float n = s * (x[i] - m);
        out_idx[i] = n * weight[i] + bias[i];
    }
}
