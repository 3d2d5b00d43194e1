// NCHW -> CHWN, one element per thread over the flat input index; the batch index is the
// quotient by a product of the dimensions.  Spelling of minhkhoi1026/cldrive,
// github-crawled-kernels-modified/2490d1d4...640a.cl (an OpenCL kernel), with CUDA's index.
// @cuda-agent sizes N=8 C=64 H=28 W=28 verify N=3 C=5 H=7 W=3 verify N=2 C=3 H=4 W=5
// @cuda-agent launch grid=cdiv(N * C * H * W, block) block=256
// @cuda-agent arg inputs in float[N * C * H * W] uniform(-1, 1)
// @cuda-agent arg outputs out float[N * C * H * W]
// @cuda-agent arg N = N
// @cuda-agent arg C = C
// @cuda-agent arg H = H
// @cuda-agent arg W = W
__global__ void NCHW2CHWN(const float* inputs, float* outputs, int N, int C, int H, int W) {
  int gid0 = blockIdx.x * blockDim.x + threadIdx.x;
  int n = gid0 / (C * H * W);
  if (n < N) {
    int chw = gid0 - n * (C * H * W);
    outputs[chw * N + n] = inputs[gid0];
  }
}
