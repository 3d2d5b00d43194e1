// out = inp @ weight^T + bias, one output per thread (llm.c's matmul_forward_kernel1): bt along x,
// oc along y, 8x8 blocks; inp is (BT, C) and weight is (OC, C), both row-major.
// @cuda-agent sizes bt=2048 c=768 oc=2304 verify bt=33,100,64 c=5,37,64 oc=17,100,128
// @cuda-agent launch grid=(cdiv(bt, block_x), cdiv(oc, block_y)) block=(8, 8)
// @cuda-agent arg out out float[bt * oc]
// @cuda-agent arg inp in float[bt * c] uniform(-1, 1)
// @cuda-agent arg weight in float[oc * c] uniform(-1, 1)
// @cuda-agent arg bias in float[oc] uniform(-1, 1)
// @cuda-agent arg BT = bt
// @cuda-agent arg C = c
// @cuda-agent arg OC = oc
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
// @cuda-agent work flops=2*bt*oc*c
__global__ void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int BT, int C, int OC) {
    int bt = blockIdx.x * blockDim.x + threadIdx.x;
    int oc = blockIdx.y * blockDim.y + threadIdx.y;
    if (bt < BT && oc < OC) {
        float val = bias[oc];
        for (int i = 0; i < C; i++) {
            val += inp[bt * C + i] * weight[oc * C + i];
        }
        out[bt * OC + oc] = val;
    }
}
