// Causal attention scores: only the lower triangle (j <= i) is computed; above the diagonal the
// output is don't-care (the softmax that follows masks it).
// @cuda-agent sizes T=1024 C=64 verify T=97,333
// @cuda-agent launch grid=(cdiv(T, 16), cdiv(T, 16)) block=(16, 16)
// @cuda-agent arg out out float[T*T]
// @cuda-agent arg q in float[T*C]
// @cuda-agent arg k in float[T*C]
// @cuda-agent compare out[i < T, j < T] where j <= i
__global__ void causal_scores(float* out, const float* q, const float* k, int T, int C)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < T && j <= i) {
        float acc = 0.0f;
        for (int c = 0; c < C; c++) acc += q[i * C + c] * k[j * C + c];
        out[i * T + j] = acc;
    }
}

// Writes the whole square, zeros above the diagonal: equal where it matters.
__global__ void causal_scores_square(float* out, const float* q, const float* k, int T, int C)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < T && j < T) {
        float acc = 0.0f;
        for (int c = 0; c < C && j <= i; c++) acc += q[i * C + c] * k[j * C + c];
        out[i * T + j] = acc;
    }
}

// Wrong on the diagonal, which is cared for.
__global__ void causal_scores_off_diagonal(float* out, const float* q, const float* k, int T, int C)
{
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < T && j <= i) {
        float acc = 0.0f;
        for (int c = 0; c < C; c++) acc += q[i * C + c] * k[j * C + c];
        out[i * T + j] = j == i ? 0.0f : acc;
    }
}
