// origin: dhkim92-dev/gpu-in-action, examples/8.conv2d/CUDA/kernel.cu (conv2d_naive), commit 552787fb9448fc7ee3027117fabae21219d0a2cb
// license: none stated in the repository; the kernel as upstream wrote it
// Filter size as parameters (KW, KH), taps guarded inside the image, the output accumulated in
// the tap loop and no output guard: the sizes are multiples of the blocks tried (16x16, 32x8).
// @cuda-agent sizes H=48 W=64 KW=5 KH=5 verify H=16,48 W=32,64 KW=3,5 KH=5,3
// @cuda-agent launch grid=(cdiv(W, block_x), cdiv(H, block_y)) block=(16, 16)
// @cuda-agent arg input in float[H * W] uniform(-1, 1)
// @cuda-agent arg output inout float[H * W] const(0)
// @cuda-agent arg filter in float[KW * KH] uniform(-1, 1)
// @cuda-agent arg W = W
// @cuda-agent arg H = H
// @cuda-agent arg KW = KW
// @cuda-agent arg KH = KH
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void conv2d_naive(
    const float* input,
    float* output,
    float* filter, 
    int W,
    int H,
    int KW,
    int KH
) {
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    int c = blockIdx.x * blockDim.x + threadIdx.x;

    for (  int fr = 0; fr < KH; fr++) {
        for (int fc = 0; fc < KW; fc++) {
            int in_r = r + fr - KH / 2;
            int in_c = c + fc - KW / 2;
            if (in_r >= 0 && in_r < H && in_c >= 0 && in_c < W) {
                output[r * W + c] += input[in_r * W + in_c] * filter[fr * KW + fc];
            }
        }
    }
}
