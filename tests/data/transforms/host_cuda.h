// A host emulation of the CUDA built-ins that simple kernels use, so their rewrites can be checked
// for equal outputs with a C++ compiler on a machine without a GPU.  Blocks run one after another.
// With HOST_CUDA_THREADS defined, the threads of a block run as std::threads, so __syncthreads is
// a barrier, __shared__ variables are shared by the block and __shfl_down_sync/__shfl_xor_sync/__shfl_up_sync
// exchange values through its warp (__syncwarp is the warp's barrier); without it they run one after another (kernels with neither).
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __constant__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
static dim3 gridDim, blockDim, blockIdx;
static thread_local dim3 threadIdx;

struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) double2 { double x, y; };
struct alignas(16) longlong2 { long long x, y; };

struct Warp {
    explicit Warp(std::ptrdiff_t lanes) : sync(lanes) {}
    std::barrier<> sync;
    unsigned long long slot[32] = {};
};
static std::unique_ptr<std::barrier<>> block_sync;
static std::vector<std::unique_ptr<Warp>> warps;
static std::mutex atomics;

inline unsigned linear_tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
inline void __syncthreads() { block_sync->arrive_and_wait(); }

template <class T> T __shfl_down_sync(unsigned, T v, int offset) {
    static_assert(sizeof(T) <= sizeof(unsigned long long));
    unsigned tid = linear_tid(), lane = tid % 32;
    Warp& w = *warps[tid / 32];
    std::memcpy(&w.slot[lane], &v, sizeof(T));
    w.sync.arrive_and_wait();
    T out = v;
    if (lane + offset < 32) std::memcpy(&out, &w.slot[lane + offset], sizeof(T));
    w.sync.arrive_and_wait();
    return out;
}

template <class T> T __shfl_xor_sync(unsigned, T v, int mask) {
    static_assert(sizeof(T) <= sizeof(unsigned long long));
    unsigned tid = linear_tid(), lane = tid % 32;
    Warp& w = *warps[tid / 32];
    std::memcpy(&w.slot[lane], &v, sizeof(T));
    w.sync.arrive_and_wait();
    T out = v;
    if ((lane ^ mask) < 32) std::memcpy(&out, &w.slot[lane ^ mask], sizeof(T));
    w.sync.arrive_and_wait();
    return out;
}
template <class T> T __shfl_up_sync(unsigned, T v, unsigned delta) {
    static_assert(sizeof(T) <= sizeof(unsigned long long));
    unsigned tid = linear_tid(), lane = tid % 32;
    Warp& w = *warps[tid / 32];
    std::memcpy(&w.slot[lane], &v, sizeof(T));
    w.sync.arrive_and_wait();
    T out = v;
    if (lane >= delta) std::memcpy(&out, &w.slot[lane - delta], sizeof(T));
    w.sync.arrive_and_wait();
    return out;
}
inline void __syncwarp(unsigned = 0xffffffffu) { warps[linear_tid() / 32]->sync.arrive_and_wait(); }

template <class T> T __ldg(const T* p) { return *p; }
template <class T> T atomicAdd(T* p, T v) { std::lock_guard<std::mutex> hold(atomics); T old = *p; *p += v; return old; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __log2f(float x) { return log2f(x); }
inline float __log10f(float x) { return log10f(x); }
inline float __exp10f(float x) { return powf(10.0f, x); }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
inline float __sinf(float x) { return sinf(x); }
inline float __cosf(float x) { return cosf(x); }
inline float __tanf(float x) { return tanf(x); }
inline float __powf(float x, float y) { return powf(x, y); }
inline float __fdividef(float x, float y) { return x / y; }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// CUDA's device runtime has unqualified min/max over the arithmetic types, mixed ones included
// (both operands converted to their common type, as the usual arithmetic conversions do).
template <class A, class B>
    requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
std::common_type_t<A, B> max(A a, B b) {
    using C = std::common_type_t<A, B>;
    return (C)a < (C)b ? (C)b : (C)a;
}
template <class A, class B>
    requires std::is_arithmetic_v<A> && std::is_arithmetic_v<B>
std::common_type_t<A, B> min(A a, B b) {
    using C = std::common_type_t<A, B>;
    return (C)b < (C)a ? (C)b : (C)a;
}

// An argument as the kernel's parameter type: the host arrays' element types are the spec's
// (`signed char` for int8), a kernel may take the same bytes as `char*`, as a CUDA launch allows.
template <class P, class A> P as_param(A a) {
    if constexpr (std::is_pointer_v<P> && (std::is_pointer_v<A> || std::is_integral_v<A>))  // NULL as 0
        return reinterpret_cast<P>(a);
    else
        return static_cast<P>(a);
}

template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, A... args) {
    gridDim = grid;
    blockDim = block;
    const unsigned threads = block.x * block.y * block.z;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                blockIdx = {bx, by, bz};
                block_sync = std::make_unique<std::barrier<>>(threads);
                warps.clear();
                for (unsigned w = 0; w * 32 < threads; ++w)
                    warps.push_back(std::make_unique<Warp>(std::min(32u, threads - w * 32)));
                auto run = [=](unsigned t) {
                    threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                    kernel(as_param<P>(args)...);
                };
#ifdef HOST_CUDA_THREADS
                std::vector<std::thread> team;
                for (unsigned t = 0; t < threads; ++t) team.emplace_back(run, t);
                for (auto& th : team) th.join();
#else  // no barriers or shuffles in either kernel: one thread after another is exact and fast
                for (unsigned t = 0; t < threads; ++t) run(t);
#endif
            }
}

// 2-byte floats: storage with float conversions (bf16 rounds to nearest even, as __float2bfloat16).
struct __nv_bfloat16 {
    unsigned short bits;
    __nv_bfloat16() = default;
    template <class T> __nv_bfloat16(T v) {
        float f = (float)v;
        unsigned u;
        std::memcpy(&u, &f, 4);
        bits = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    operator float() const {
        unsigned u = (unsigned)bits << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
};
typedef __nv_bfloat16 nv_bfloat16;
inline float __bfloat162float(__nv_bfloat16 h) { return (float)h; }
inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }

struct __half {
    _Float16 value;
    __half() = default;
    template <class T> __half(T v) : value((_Float16)(float)v) {}
    operator float() const { return (float)value; }
};
typedef __half half;
inline float __half2float(__half h) { return (float)h; }
inline __half __float2half(float f) { return __half(f); }
inline float __tanhf(float x) { return tanhf(x); }

// Cooperative groups' thread block: its sync is the block's barrier.
namespace cooperative_groups {
struct thread_block {
    void sync() const { __syncthreads(); }
    unsigned thread_rank() const { return linear_tid(); }
};
inline thread_block this_thread_block() { return {}; }
inline void sync(const thread_block&) { __syncthreads(); }
}  // namespace cooperative_groups
