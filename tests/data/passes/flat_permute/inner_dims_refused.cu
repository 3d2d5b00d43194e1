// refused: both sides are contiguous along the flat index already
// (n, c, h, w) -> (n, h, c, w): the innermost dimension stays innermost, so reads and writes
// are both contiguous; spelling of ShouyangDong/xpiler-eval KernelBench/CUDA/transpose_2_32_4_64.cu
// (an earlier version of that file), the dimensions constants of the kernel.
// @cuda-agent sizes total=2*32*4*64
// @cuda-agent launch grid=cdiv(total, block) block=256
// @cuda-agent arg input in float[total] uniform(-1, 1)
// @cuda-agent arg output out float[total]
__global__ void transpose(const float* __restrict__ input,
                                 float* __restrict__ output) {
    const int N = 2;
    const int C = 32;
    const int H = 4;
    const int W = 64;
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total = N * C * H * W;
    if (idx < total) {
        int out_idx =
            (idx / (C * H * W)) * (H * C * W) +
            ((idx / W) % H) * (C * W) +
            ((idx / (H * W)) % C) * W +
            (idx % W);

        int in_idx =
            (idx / (C * H * W)) * (C * H * W) +
            ((idx / (H * W)) % C) * (H * W) +
            ((idx / W) % H) * W +
            (idx % W);

        output[out_idx] = input[in_idx];
    }
}
