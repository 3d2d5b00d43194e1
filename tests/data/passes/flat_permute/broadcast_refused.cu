// refused: an input element is read twice
// A broadcast of a row over the columns: every input element goes to many outputs.
// @cuda-agent sizes R=512 C=256 verify R=7 C=5
// @cuda-agent launch grid=cdiv(R * C, block) block=256
// @cuda-agent arg in in float[C] uniform(-1, 1)
// @cuda-agent arg out out float[R * C]
// @cuda-agent arg R = R
// @cuda-agent arg C = C
__global__ void broadcast(const float* in, float* out, int R, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < R * C) out[idx] = in[idx % C];
}
