// Specs an attacker (or a typo) could write: each must be a spec error at its own line, and the
// good kernels around them keep their lenses, hover and diagnostics.

// @cuda-agent sizes n=1<<20
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
__global__ void good_first(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}

// @cuda-agent sizes n=min(4096)
// @cuda-agent arg y out float[1]
__global__ void one_arg_min(float* y, int n) { y[0] = n; }

// @cuda-agent sizes n=cdiv(1e999, 2)
// @cuda-agent arg y out float[1]
__global__ void infinite_cdiv(float* y, int n) { y[0] = n; }

// @cuda-agent sizes n=cdiv(1, 1e-320)
// @cuda-agent arg y out float[1]
__global__ void subnormal_cdiv(float* y, int n) { y[0] = n; }

// @cuda-agent sizes n=1000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000
// @cuda-agent arg y out float[1]
__global__ void huge_integer(float* y, int n) { y[0] = n; }

// @cuda-agent sizes n=1024
// @cuda-agent tolerance atol=1e999 rtol=-1
// @cuda-agent arg y out float[1]
__global__ void bad_tolerance(float* y, int n) { y[0] = n; }

// @cuda-agent sizes n=1024
// @cuda-agent launch grid=1<<31 block=256
// @cuda-agent arg y out float[1]
__global__ void grid_too_big(float* y, int n) { y[0] = n; }

// @cuda-agent sizes n=1024
// @cuda-agent launch grid=(1, 65536) block=256
// @cuda-agent arg y out float[1]
__global__ void grid_y_too_big(float* y, int n) { y[0] = n; }

// @cuda-agent sizes n=1024
// @cuda-agent launch grid=1 block=256 smem=1<<62
// @cuda-agent arg y out float[1]
__global__ void smem_too_big(float* y, int n) { y[0] = n; }

// @cuda-agent sizes n=1<<20
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
__global__ void good_last(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + 1.0f;
}
