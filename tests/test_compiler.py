"""NVRTC compilation on a machine with no GPU: outputs, diagnostics, resources, names, cache, pool."""

from __future__ import annotations

import pytest

from sandbox.compile_pool import CompilePool
from sandbox.compiler import compile_cuda, parse_diagnostics, parse_resources

TEMPLATED = """\
#include <cuda_fp16.h>
#include <cstdint>

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK) scale(const T* __restrict__ x, T* y, int64_t n, float a) {
    __shared__ float tile[BLOCK];
    int64_t i = blockIdx.x * (int64_t)BLOCK + threadIdx.x;
    tile[threadIdx.x] = i < n ? (float)x[i] : 0.f;
    __syncthreads();
    if (i < n) y[i] = (T)(a * tile[threadIdx.x]);
}
"""


def test_templated_kernel_compiles_to_cubin_with_lowered_name_and_resources() -> None:
    out = compile_cuda(TEMPLATED, name_expressions=["scale<float, 256>", "scale<__half, 128>"], arch="sm_90")
    assert out.result.ok, out.result.log
    assert out.binary[:4] == b"\x7fELF"  # a cubin is an ELF image
    mangled = out.result.lowered_names["scale<float, 256>"]
    assert mangled.startswith("_Z5scaleIfLi256EE")
    res = out.result.resources[mangled]
    assert res.registers > 0
    assert res.shared_bytes == 256 * 4
    assert out.result.resources[out.result.lowered_names["scale<__half, 128>"]].shared_bytes == 128 * 4


def test_ptx_for_virtual_architecture() -> None:
    out = compile_cuda('extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.f; }', arch="compute_90")
    assert out.result.ok and out.ptx
    assert b".entry k" in out.binary


def test_error_reports_file_line_and_column() -> None:
    src = 'extern "C" __global__ void k(float* x) {\n    x[0] = 1.f\n    x[1] = 2.f;\n}\n'
    out = compile_cuda(src, filename="broken.cu")
    assert not out.result.ok
    assert out.binary == b""
    errors = [d for d in out.result.diagnostics if d.severity == "error"]
    assert errors, out.result.log
    assert errors[0].file == "broken.cu"
    assert errors[0].line in (2, 3)  # NVRTC reports the missing ';' where the next token starts
    assert errors[0].column >= 1


def test_warning_is_not_an_error() -> None:
    out = compile_cuda('extern "C" __global__ void k(float* x) { int unused; x[0] = 1.f; }')
    assert out.result.ok
    warnings = [d for d in out.result.diagnostics if d.severity == "warning"]
    assert warnings and "unused" in warnings[0].message
    assert warnings[0].line == 1


def test_spills_are_reported() -> None:
    src = """
    extern "C" __global__ void __launch_bounds__(1024) heavy(const float* a, float* out) {
        float v[256];
        #pragma unroll
        for (int j = 0; j < 256; ++j) v[j] = a[threadIdx.x * 256 + j] * (j + 1);
        float s = 0.f;
        for (int j = 0; j < 256; ++j) s += v[(j * 7 + threadIdx.x) & 255] * v[j];
        out[threadIdx.x] = s;
    }"""
    out = compile_cuda(src, options=["-maxrregcount=32"])
    assert out.result.ok, out.result.log
    res = out.result.resources["heavy"]
    assert res.registers > 0
    assert res.stack_bytes >= 1024  # the dynamically indexed array lives in local memory


def test_cache_hits_by_content() -> None:
    src = 'extern "C" __global__ void cached_k(int* x) { x[0] = 42; }'
    first = compile_cuda(src)
    second = compile_cuda(src)
    other = compile_cuda(src + "\n")
    assert second.result.cached and second.binary == first.binary
    assert not other.result.cached


def test_log_parsers_on_recorded_output() -> None:
    log = (
        'k.cu(6): warning #177-D: variable "unused" was declared but never referenced\n'
        "  int unused;\n      ^\n\n"
        "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'\n"
        "ptxas info    : Function properties for _Z1kPf\n"
        "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 16 bytes cumulative stack size, 2048 bytes smem, 380 bytes cmem[0]\n"
    )
    (diag,) = parse_diagnostics(log)
    assert (diag.line, diag.column, diag.severity) == (6, 5, "warning")
    res = parse_resources(log)["_Z1kPf"]
    assert (res.registers, res.spill_stores, res.spill_loads, res.shared_bytes, res.stack_bytes) == (
        40,
        8,
        4,
        2048,
        16,
    )
    assert res.constant_bytes == 380


@pytest.mark.timeout(120)
def test_pool_compiles_in_parallel_processes() -> None:
    pool = CompilePool(workers=2)
    try:
        futs = [pool.submit(f'extern "C" __global__ void k{i}(int* x) {{ x[0] = {i}; }}') for i in range(4)]
        results = [f.result(timeout=100) for f in futs]
        assert all(r.result.ok for r in results)
        assert len({r.binary for r in results}) == 4
        again = pool.submit('extern "C" __global__ void k0(int* x) { x[0] = 0; }').result(timeout=10)
        assert again.result.cached
    finally:
        pool.close()


def test_cooperative_groups_headers_resolve() -> None:
    src = """
    #include <cooperative_groups.h>
    #include <cooperative_groups/reduce.h>
    namespace cg = cooperative_groups;
    extern "C" __global__ void warp_sum(const float* x, float* out) {
        auto tile = cg::tiled_partition<32>(cg::this_thread_block());
        float v = cg::reduce(tile, x[threadIdx.x], cg::plus<float>());
        if (tile.thread_rank() == 0) out[threadIdx.x / 32] = v;
    }"""
    out = compile_cuda(src)
    assert out.result.ok, out.result.log


def test_cache_sees_changes_to_included_headers(tmp_path) -> None:
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "scale.cuh").write_text(
        '#pragma once\n#include "factor.cuh"\n__device__ float scale(float x) { return FACTOR * x; }\n'
    )
    (inc / "factor.cuh").write_text("#define FACTOR 2.f\n")
    src = '#include "scale.cuh"\nextern "C" __global__ void hdr_k(float* x) { x[0] = scale(x[0]); }\n'
    first = compile_cuda(src, options=[f"-I{inc}"], trusted=True)
    assert first.result.ok, first.result.log
    assert compile_cuda(src, options=[f"-I{inc}"], trusted=True).result.cached
    (inc / "factor.cuh").write_text("#define FACTOR 3.f +\n")  # a nested header changes (and breaks)
    changed = compile_cuda(src, options=[f"-I{inc}"], trusted=True)
    assert not changed.result.cached
    assert not changed.result.ok
