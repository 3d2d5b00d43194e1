// Template specialisations, aliases, enums, a __device__ counter and a macro chosen by #if.
#include <cstdint>
#include <cuda_fp16.h>

typedef unsigned int u32;
using real = float;
enum class Mode : int { Add = 0, Mul = 1 };
constexpr int kTile = 32;
static_assert(kTile % 32 == 0, "tile must be a warp multiple");
__device__ u32 g_counter;

#if defined(USE_FAST)
#define FMA(a, b, c) __fmaf_rn(a, b, c)
#else
#define FMA(a, b, c) ((a) * (b) + (c))
#endif

template <Mode M> __device__ real apply(real a, real b);
template <> __device__ real apply<Mode::Add>(real a, real b) { return a + b; }
template <> __device__ real apply<Mode::Mul>(real a, real b) { return a * b; }

struct alignas(16) Vec4 { real x, y, z, w; };

template <Mode M>
__global__ void combine(const Vec4* __restrict__ a, const real* b, Vec4* out, u32 n) {
    extern __shared__ real smem[];
    
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    smem[threadIdx.x] = i < n ? b[i] : real(0);
    __syncthreads();
    if (i < n) {
        Vec4 v = a[i];
        real s = smem[threadIdx.x];
        out[i] = Vec4{apply<M>(v.x, s), apply<M>(v.y, s), FMA(v.z, s, 0.f), v.w};
        atomicAdd(&g_counter, 1u);
    }
}

__global__ void tiled_transpose(const __half* in, __half* out, int rows, int cols) {
    __shared__ __half tile[kTile][kTile + 1];
    int x = blockIdx.x * kTile + threadIdx.x, y = blockIdx.y * kTile + threadIdx.y;
    if (x < cols && y < rows) tile[threadIdx.y][threadIdx.x] = in[y * cols + x];
    __syncthreads();
    x = blockIdx.y * kTile + threadIdx.x; y = blockIdx.x * kTile + threadIdx.y;
    if (x < rows && y < cols) out[y * rows + x] = tile[threadIdx.x][threadIdx.y];
}

int main() {
    combine<Mode::Add><<<dim3(64), dim3(256), 256 * sizeof(real)>>>(nullptr, nullptr, nullptr, 1u << 14);
}
