// composes: LaunchFill + Vectorize
// An elementwise kernel launched as one block whose threads stride over the elements: a launch
// fill (a thread per element), then the elementwise rewrites (packs, grid-stride loop) compose.
// @cuda-agent sizes n=1<<22 verify n=1000,4099
// @cuda-agent launch grid=1 block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
// @cuda-agent arg a = 1.5
// @cuda-agent arg n = n
__global__ void scale(const float* x, float* y, float a, int n) {
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        y[i] = a * x[i] + 1.0f;
    }
}
