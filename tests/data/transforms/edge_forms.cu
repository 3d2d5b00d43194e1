// Forms the transformations must handle or refuse: size_t indices used in the arithmetic,
// templates with __launch_bounds__, bodies that depend on the thread's position.
#include <cstddef>

// y = a * x + (i mod 3), 64-bit index.
// @cuda-agent sizes n=1<<20 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
// @cuda-agent arg a = 2.5
__global__ void scale(const float* x, float* y, size_t n, float a)
{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const float offset = 0.5f;
    if (i < n) {
        y[i] = a * x[i] + (float)(i % 3) + offset;
    }
}

// @cuda-agent sizes n=1<<20
// @cuda-agent template float, 128
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) bounded(const T* x, T* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * T(2);
}

// Writes the lane of each element: the body depends on threadIdx, so it cannot be strided.
// @cuda-agent sizes n=1<<20
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
__global__ void lane_id(const float* x, float* y, int n) {
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    if (i < n) y[i] = x[i] + (float)(threadIdx.x % 32);
}

// A histogram whose threads leave early: a block-wide merge at the end would wait for them.
// @cuda-agent sizes n=1<<20
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg v in int[n] randint(0, 64)
// @cuda-agent arg counts inout unsigned int[64] const(0)
// @cuda-agent arg n = n
__global__ void early_exit_histogram(const int* v, unsigned int* counts, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(&counts[v[i] & 63], 1u);
}

// Stream compaction: the value atomicAdd returns is a global position, which a per-block copy would change.
// @cuda-agent sizes n=1<<20
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg kept out float[n]
// @cuda-agent arg count inout unsigned int[1] const(0)
// @cuda-agent arg n = n
__global__ void compact(const float* x, float* kept, unsigned int* count, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n && x[i] > 0.0f) kept[atomicAdd(&count[0], 1u)] = x[i];
}
