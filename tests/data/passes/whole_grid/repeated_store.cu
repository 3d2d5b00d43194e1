// The store sits in a loop that may run no time (reps = 0 at the verify sizes): the elements it
// does not store keep their values, so the output's pack is loaded before the lanes run.
// @cuda-agent sizes n=1<<12 reps=3 verify n=512,1024 reps=0,2
// @cuda-agent launch grid=n / block block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y inout float[n] uniform(-1, 1)
// @cuda-agent arg a = 0.5
// @cuda-agent arg reps = reps
__global__ void repeated_axpb(const float* x, float* y, float a, int reps) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    for (int r = 0; r < reps; ++r)
        y[idx] = a * x[idx] + 1.0f;
}
