// Transpose with a constexpr block edge in the indices and the element type a template parameter.
constexpr int BLOCK = 32;
// @cuda-agent sizes n=2048 m=2048 verify n=32,96 m=64,128
// @cuda-agent template float
// @cuda-agent launch grid=(cdiv(m, 32), cdiv(n, 32)) block=(32, 32)
// @cuda-agent arg a in float[n * m] uniform(-1, 1)
// @cuda-agent arg b out float[n * m]
// @cuda-agent arg n = n
// @cuda-agent arg m = m
template <typename T>
__global__ void transpose_t(const T* a, T* b, int n, int m) {
    int j = BLOCK * blockIdx.x + threadIdx.x;
    int i = BLOCK * blockIdx.y + threadIdx.y;
    if (i < n && j < m) {
        b[j * n + i] = a[i * m + j];
    }
}
