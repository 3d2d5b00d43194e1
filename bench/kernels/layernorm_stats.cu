// Layer normalisation that also stores each row's mean and reciprocal standard deviation for the
// backward pass, one thread per row (llm.c's layernorm_forward_kernel1).
// @cuda-agent sizes n=16384 c=768 verify n=5,33 c=8,100
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg out out float[n * c]
// @cuda-agent arg mean out float[n]
// @cuda-agent arg rstd out float[n]
// @cuda-agent arg inp in float[n * c] normal
// @cuda-agent arg weight in float[c] uniform(0.5, 1.5)
// @cuda-agent arg bias in float[c] uniform(-0.5, 0.5)
// @cuda-agent arg N = n
// @cuda-agent arg C = c
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void layernorm_forward_kernel1(float* out, float* mean, float* rstd,
                                          const float* inp, const float* weight, const float* bias,
                                          int N, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    float eps = 1e-5f;

    if (idx < N) {
        // seek to the input position inp[idx,:]
        const float* x = inp + idx * C;
        // calculate the mean
        float m = 0.0f;
        for (int i = 0; i < C; i++) {
            m += x[i];
        }
        m = m / C;
        // calculate the variance (without any bias correction)
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float xshift = x[i] - m;
            v += xshift * xshift;
        }
        v = v / C;
        // calculate the rstd
        float s = 1.0f / sqrtf(v + eps);
        // seek to the output position in out[idx,:]
        float* out_idx = out + idx * C;
        for (int i = 0; i < C; i++) {
            float n = (s * (x[i] - m)); // normalized output
            float o = n * weight[i] + bias[i]; // scale and shift it
            out_idx[i] = o; // write
        }
        // cache the mean and rstd for the backward pass later
        mean[idx] = m;
        rstd[idx] = s;
    }
}
