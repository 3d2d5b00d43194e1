// Causal attention softmax over (B, NH, T, T) scores, one thread per query row (llm.c's
// attention_softmax_kernel1): row t only sees keys t2 <= t; the masked part is written as zeros.
// @cuda-agent sizes b=8 nh=12 t=1024 verify b=1,2 nh=3,2 t=7,33
// @cuda-agent launch grid=cdiv(b * t * nh, block) block=256
// @cuda-agent arg att out float[b * nh * t * t]
// @cuda-agent arg preatt in float[b * nh * t * t] uniform(-5, 5)
// @cuda-agent arg B = b
// @cuda-agent arg T = t
// @cuda-agent arg NH = nh
// @cuda-agent tolerance atol=1e-6 rtol=1e-4
__global__ void attention_softmax_kernel1(float* att, const float* preatt, int B, int T, int NH) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total_threads = B * T * NH;

    if (idx < total_threads) {
        int h = idx % NH;
        int t = (idx / NH) % T;
        int b = idx / (NH * T);

        const float* preatt_bth = preatt + b*NH*T*T + h*T*T + t*T;
        float* att_bth = att + b*NH*T*T + h*T*T + t*T;

        // find maxval
        float maxval = -10000.0f; // TODO something better
        for (int t2 = 0; t2 <= t; t2++) {
            if (preatt_bth[t2] > maxval) {
                maxval = preatt_bth[t2];
            }
        }

        // calculate the exp and keep track of sum
        float expsum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
            float expv = expf(preatt_bth[t2] - maxval);
            expsum += expv;
            att_bth[t2] = expv;
        }
        float expsum_inv = expsum == 0.0f ? 0.0f : 1.0f / expsum;

        // normalize to get the softmax
        for (int t2 = 0; t2 < T; t2++) {
            if (t2 <= t) {
                att_bth[t2] *= expsum_inv;
            } else {
                // causal attention mask. not strictly necessary to set to zero here
                // only doing this explicitly for debugging and checking to PyTorch
                att_bth[t2] = 0.0f;
            }
        }
    }
}
