// cuda-agent corpus: column_reduction
// repository: zjin-lcf/HeCBench
// path: src/attention-cuda/kernels.h
// commit: f27000a5188f8ac79bd43fc95a1b3f890c18823d
// license: BSD-3-Clause
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
// @cuda-agent sizes n=65536 d=2048 verify n=37,301 d=33,257
// @cuda-agent launch grid=cdiv(d, block) block=256
// @cuda-agent arg score in float[n] uniform(0, 0.01)
// @cuda-agent arg value in float[n * d]
// @cuda-agent arg output out float[d]
// @cuda-agent arg n = n
// @cuda-agent arg d = d
__global__
void attention_kernel3 (
    const float*__restrict__ score,
    const float*__restrict__ value,
    float*__restrict__ output,
    const int n,
    const int d)
{
  int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j < d) {
    float sum = 0;
    for (int i = 0; i < n; i++)
      sum += score[i] * value[i * d + j];
    output[j] = sum;
  }
}
