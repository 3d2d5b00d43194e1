// In-place saxpy with a size_t index (y is read and written), a macro in the body.
#define OFFSET 0.25f
// @cuda-agent sizes n=1<<20 verify n=512,1536
// @cuda-agent launch grid=n / block block=256
// @cuda-agent require n % 256 == 0
// @cuda-agent arg a = 1.5
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y inout float[n] uniform(-1, 1)
__global__ void saxpy(float a, const float* x, float* y) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float t = a * x[i] + OFFSET;
    y[i] = t + y[i];
}
