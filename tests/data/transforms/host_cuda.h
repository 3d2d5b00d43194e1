// A host emulation of the CUDA built-ins that simple kernels use, so their rewrites can be checked
// for equal outputs with a C++ compiler on a machine without a GPU.  Blocks run one after another.
// With HOST_CUDA_THREADS defined, the threads of a block run as fibers (ucontext) on one OS thread,
// switched at barriers, so __syncthreads is a barrier, __shared__ variables are shared by the block
// and __shfl_down_sync/__shfl_xor_sync/__shfl_up_sync exchange values through its warp (__syncwarp
// is the warp's barrier).  Each thread runs alone up to its next barrier, the threads in order on
// one pass and in reverse order on the next (so a read of another thread's element that lacks a
// barrier finds it not yet written one way or the other); a barrier some threads never reach
// aborts.  Fibers, not OS threads: a block of 1024 threads costs microseconds, not a thread team.
// Without it the threads run one after another (kernels with neither).
#pragma once
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <functional>
#include <mutex>
#include <type_traits>
#include <vector>
#ifdef HOST_CUDA_THREADS
#include <ucontext.h>
#endif

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
static dim3 threadIdx;  // the running thread's (set at each switch)

struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) int2 { int x, y; };
struct alignas(16) int4 { int x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) double2 { double x, y; };
struct alignas(16) longlong2 { long long x, y; };

// A barrier of `expected` threads: a thread that arrives waits (its fiber yields) until the last
// one arrives, which opens the next generation and goes on.
struct Gate {
    explicit Gate(unsigned n) : expected(n) {}
    unsigned expected, arrived = 0;
    unsigned long long generation = 0;
    void arrive_and_wait();
};
struct Warp {
    explicit Warp(unsigned lanes) : sync(lanes) {}
    Gate sync;
    unsigned long long slot[32] = {};
};
static std::unique_ptr<Gate> block_sync;
static std::vector<std::unique_ptr<Warp>> warps;
static std::mutex atomics;

#ifdef HOST_CUDA_THREADS
struct Fiber {
    ucontext_t context;
    std::unique_ptr<char[]> stack;
    dim3 index;
    const Gate* waiting = nullptr;  // the barrier it waits at, in generation `generation`
    unsigned long long generation = 0;
    bool done = false;
};
static constexpr std::size_t FIBER_STACK = 256 * 1024;
static std::vector<Fiber> fibers;
static unsigned running;  // the fiber that runs
static ucontext_t scheduler;
static std::function<void(unsigned)> fiber_body;

inline void Gate::arrive_and_wait() {
    Fiber& f = fibers[running];
    f.waiting = this;
    f.generation = generation;
    if (++arrived == expected) {  // the last one: every thread of the barrier has arrived
        arrived = 0;
        ++generation;
    }
    swapcontext(&f.context, &scheduler);  // all go on in the scheduler's next pass
}

static void fiber_entry() {
    fiber_body(running);
    fibers[running].done = true;  // back to the scheduler through uc_link
}

// Runs `threads` fibers (thread t computes its index with `index(t)`) until all have returned.
inline void run_fibers(unsigned threads, const std::function<dim3(unsigned)>& index) {
    if (fibers.size() < threads) fibers.resize(threads);
    for (unsigned t = 0; t < threads; ++t) {
        Fiber& f = fibers[t];
        if (!f.stack) f.stack = std::make_unique<char[]>(FIBER_STACK);
        getcontext(&f.context);
        f.context.uc_stack.ss_sp = f.stack.get();
        f.context.uc_stack.ss_size = FIBER_STACK;
        f.context.uc_link = &scheduler;
        makecontext(&f.context, fiber_entry, 0);
        f.index = index(t);
        f.waiting = nullptr;
        f.done = false;
    }
    unsigned live = threads;
    for (bool forward = true; live; forward = !forward) {
        bool moved = false;
        for (unsigned k = 0; k < threads; ++k) {
            Fiber& f = fibers[forward ? k : threads - 1 - k];
            if (f.done || (f.waiting != nullptr && f.waiting->generation == f.generation)) continue;
            f.waiting = nullptr;
            running = forward ? k : threads - 1 - k;
            threadIdx = f.index;
            swapcontext(&scheduler, &f.context);
            moved = true;
            live -= f.done;
        }
        if (!moved) {
            std::fprintf(stderr, "host_cuda: threads wait at a barrier that the others never reach\n");
            std::abort();
        }
    }
}
#else
inline void Gate::arrive_and_wait() {
    std::fprintf(stderr, "host_cuda: a barrier without HOST_CUDA_THREADS\n");
    std::abort();
}
#endif

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
                block_sync = std::make_unique<Gate>(threads);
                warps.clear();
                for (unsigned w = 0; w * 32 < threads; ++w)
                    warps.push_back(std::make_unique<Warp>(std::min(32u, threads - w * 32)));
                auto index = [=](unsigned t) {
                    return dim3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                };
#ifdef HOST_CUDA_THREADS
                fiber_body = [=](unsigned) { kernel(as_param<P>(args)...); };
                run_fibers(threads, index);
#else  // no barriers or shuffles in either kernel: one thread after another is exact and fast
                for (unsigned t = 0; t < threads; ++t) {
                    threadIdx = index(t);
                    kernel(as_param<P>(args)...);
                }
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

// Cooperative groups' thread block: its sync is the block's barrier.  A 32-thread tile is the warp:
// its shuffles are the warp's, and cg::reduce combines the lanes in a butterfly (every lane gets it).
namespace cooperative_groups {
struct thread_block {
    void sync() const { __syncthreads(); }
    unsigned thread_rank() const { return linear_tid(); }
};
inline thread_block this_thread_block() { return {}; }
inline void sync(const thread_block&) { __syncthreads(); }
template <unsigned Size> struct thread_block_tile {
    static_assert(Size == 32, "host_cuda emulates whole-warp tiles only");
    unsigned thread_rank() const { return linear_tid() % Size; }
    unsigned size() const { return Size; }
    unsigned meta_group_rank() const { return linear_tid() / Size; }
    unsigned meta_group_size() const { return (blockDim.x * blockDim.y * blockDim.z + Size - 1) / Size; }
    void sync() const { __syncwarp(); }
    template <class T> T shfl_down(T v, unsigned delta) const { return __shfl_down_sync(0xffffffffu, v, delta); }
    template <class T> T shfl_xor(T v, unsigned mask) const { return __shfl_xor_sync(0xffffffffu, v, mask); }
    template <class T> T shfl_up(T v, unsigned delta) const { return __shfl_up_sync(0xffffffffu, v, delta); }
};
template <unsigned Size> thread_block_tile<Size> tiled_partition(const thread_block&) { return {}; }
template <class T> struct plus {
    T operator()(T a, T b) const { return a + b; }
};
template <class T> struct greater {
    T operator()(T a, T b) const { return a > b ? a : b; }
};
template <class T, class Op> T reduce(const thread_block_tile<32>& tile, T v, Op op) {
    for (unsigned mask = 16; mask > 0; mask >>= 1) v = op(v, tile.shfl_xor(v, mask));
    return v;
}
}  // namespace cooperative_groups
