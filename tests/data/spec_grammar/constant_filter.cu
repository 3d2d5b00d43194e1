// A convolution whose filter lives in __constant__ memory, filled by the host from the same data
// it passes as `filter` (cudaMemcpyToSymbol(c_filter, h_filter, ...)).
#define K 9
__constant__ float c_filter[K];

// @cuda-agent sizes n=1<<20 verify n=97,1021
// @cuda-agent arg out out float[n]
// @cuda-agent arg in in float[n + 8]
// @cuda-agent arg filter in float[9]
// @cuda-agent const c_filter float[9] copy(filter)
__global__ void conv_const(float* out, const float* in, const float* filter, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float acc = 0.0f;
        for (int t = 0; t < K; t++) acc += c_filter[t] * in[i + t];
        out[i] = acc;
    }
}

// Reads the pointer instead: equal only when c_filter holds filter's data.
__global__ void conv_pointer(float* out, const float* in, const float* filter, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float acc = 0.0f;
        for (int t = 0; t < K; t++) acc += filter[t] * in[i + t];
        out[i] = acc;
    }
}
