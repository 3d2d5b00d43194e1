// Causal attention scores: the per-element dot product is a __device__ function passed as a
// template argument; threads above the diagonal leave early.
typedef float (*tri_fn)(const float*, const float*, int, int, int);

__device__ float matmul_tri_naive(const float* q, const float* k, int i, int j, int C) {
    float acc = 0.0f;
    for (int c = 0; c < C; c++) {
        acc += q[i * C + c] * k[j * C + c];
    }
    return acc;
}

// @cuda-agent sizes T=1024 C=64 verify T=17,40 C=9,33
// @cuda-agent template matmul_tri_naive
// @cuda-agent launch grid=(cdiv(T, block_x), cdiv(T, block_y)) block=(16, 16)
// @cuda-agent arg out inout float[T * T] const(0)
// @cuda-agent arg q in float[T * C] uniform(-1, 1)
// @cuda-agent arg k in float[T * C] uniform(-1, 1)
// @cuda-agent arg T = T
// @cuda-agent arg C = C
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
template <tri_fn product>
__global__ void trimul_global(float* out, const float* q, const float* k, int T, int C) {
    int i = blockIdx.y * blockDim.y + threadIdx.y;
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T || j >= T || j > i) return;
    out[i * T + j] = product(q, k, i, j, C);
}
