// Structured inputs: cyclic keys and points on the unit circle, from element expressions.
// @cuda-agent sizes n=1<<20 verify n=97,1021
// @cuda-agent arg keys in int[n] values(i % 16)
// @cuda-agent arg x in float[n] values(cos(2 * M_PI * i / n))
// @cuda-agent arg y in float[n] values(sin(2 * M_PI * i / n))
// @cuda-agent arg ok out int[n]
__global__ void check_structure(const int* keys, const float* x, const float* y, int* ok, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ok[i] = keys[i] == i % 16 && fabsf(x[i] * x[i] + y[i] * y[i] - 1.0f) < 1e-3f;
}

// Right only when the inputs have that structure.
__global__ void all_ones(const int* keys, const float* x, const float* y, int* ok, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) ok[i] = 1;
}
