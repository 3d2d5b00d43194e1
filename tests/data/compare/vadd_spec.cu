// tests/data/sandbox/vadd.cu under a spec: the original that bench/compare_check.py compares the
// adversarial kernels of tests/data/adversarial/ against (sizes as in the sandbox's gpu tests).
// @cuda-agent sizes n=1<<16 verify n=1,4097
// @cuda-agent launch grid=cdiv(n, block) block=32
// @cuda-agent arg a in float[n]
// @cuda-agent arg b in float[n]
// @cuda-agent arg c out float[n]
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
