// cuda-agent corpus: elementwise
// repository: jcuda/jcuda-samples
// path: JCudaSamples/src/main/resources/kernels/JCudaVectorAddKernel.cu
// commit: 3de36547dec6b527d1e49d73b1817efd791b8fb6
// license: MIT
// Upstream text, unchanged but for `// @cuda-agent` spec lines.
extern "C"
// @cuda-agent sizes n=100000 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg n = n
// @cuda-agent arg a in float[n]
// @cuda-agent arg b in float[n]
// @cuda-agent arg sum out float[n]
__global__ void add(int n, float *a, float *b, float *sum)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i<n)
    {
        sum[i] = a[i] + b[i];
    }

}
