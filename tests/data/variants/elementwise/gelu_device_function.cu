// GELU with the activation in a __device__ function and a macro constant.
#define GELU_SCALING_FACTOR 0.7978845608f

__device__ __forceinline__ float gelu(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + cube)));
}

// @cuda-agent sizes N=1<<24 verify N=1000,4097
// @cuda-agent launch grid=cdiv(N, block) block=512
// @cuda-agent arg out out float[N]
// @cuda-agent arg inp in float[N] uniform(-4, 4)
// @cuda-agent arg N = N
// @cuda-agent tolerance atol=1e-5 rtol=1e-5
__global__ void gelu_forward(float* out, const float* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float xi = inp[i];
        out[i] = gelu(xi);
    }
}
