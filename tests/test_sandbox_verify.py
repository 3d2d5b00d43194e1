"""Verification logic on numpy arrays (no GPU): element types, input generation, tolerance,
comparison, unwritten-output detection, and the static rules on real NVRTC output."""

from __future__ import annotations

import numpy as np
import pytest
from sandbox_fakes import vadd_problem

from sandbox.compiler import compile_cuda
from sandbox.contract import ArgSpec, Distribution, KernelSource, Tolerance
from sandbox.verify import (
    PERTURBATION,
    POISON_A,
    POISON_B,
    Calibration,
    allowed_roundoff,
    bf16_from_f32,
    compare,
    elem_type,
    f32_from_bf16,
    generate,
    inputs_for,
    lower_precision,
    perturb,
    precision_features,
    reduction_length,
    static_rejection,
    unwritten,
)


def raw(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


@pytest.mark.parametrize(
    ("name", "scalar", "lanes", "itemsize"),
    [
        ("float32", "float32", 1, 4),
        ("bfloat16", "bfloat16", 1, 2),
        ("float4", "float32", 4, 16),
        ("half2", "float16", 2, 4),
        ("uint2", "uint32", 2, 8),
        ("double2", "float64", 2, 16),
        ("longlong2", "int64", 2, 16),
    ],
)
def test_elem_type(name: str, scalar: str, lanes: int, itemsize: int) -> None:
    et = elem_type(name)
    assert (et.scalar, et.lanes, et.itemsize) == (scalar, lanes, itemsize)


def test_elem_type_rejects_unknown() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        elem_type("float5")


def test_generate_is_seeded_and_in_range() -> None:
    arg = ArgSpec("x", "in", "float32", 1000, Distribution("uniform", -2.0, 3.0))
    a = generate(arg, np.random.default_rng(1))
    b = generate(arg, np.random.default_rng(1))
    c = generate(arg, np.random.default_rng(2))
    assert a.dtype == np.float32 and a.size == 1000
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.min() >= -2.0 and a.max() < 3.0


def test_generate_integers_vectors_and_constants() -> None:
    rng = np.random.default_rng(0)
    ints = generate(ArgSpec("i", "in", "int8", 500, Distribution("randint", -1000, 1000)), rng)
    assert ints.dtype == np.int8 and ints.min() >= -128 and ints.max() <= 127
    vec = generate(ArgSpec("v", "in", "float4", 10, Distribution("arange")), rng)
    assert vec.size == 40 and vec[39] == 39
    const = generate(ArgSpec("k", "in", "uint16", 3, Distribution("const", value=7)), rng)
    assert const.tolist() == [7, 7, 7]


def test_bf16_round_trip_and_rounding() -> None:
    x = np.array([1.0, -2.5, 3.14159, 1e-3, np.inf, np.nan], dtype=np.float32)
    back = f32_from_bf16(bf16_from_f32(x))
    assert np.allclose(back[:4], x[:4], rtol=1 / 128)
    assert np.isinf(back[4]) and np.isnan(back[5])
    # 1 + 2^-8 is exactly halfway between two bf16 values: ties go to even (1.0)
    assert f32_from_bf16(bf16_from_f32(np.array([1 + 2**-8], dtype=np.float32)))[0] == 1.0


def test_inputs_depend_on_seed_only() -> None:
    p = vadd_problem(64)
    a1, a2, b = inputs_for(p, 1), inputs_for(p, 1), inputs_for(p, 2)
    assert set(a1) == {"a", "b"}  # outputs get no data, only poison
    assert np.array_equal(a1["a"], a2["a"]) and not np.array_equal(a1["a"], b["a"])
    assert not np.array_equal(a1["a"], a1["b"])


def test_compare_within_and_beyond_tolerance() -> None:
    ref = np.linspace(-1, 1, 101, dtype=np.float32)
    tol = Calibration(override=Tolerance(1e-5, 1e-5))
    assert compare(raw(ref), raw(ref + np.float32(5e-6)), "float32", tol).ok
    got = ref.copy()
    got[37] += 1e-3
    cmp = compare(raw(ref), raw(got), "float32", tol)
    assert not cmp.ok and cmp.first_bad_index == 37
    assert cmp.max_abs_err == pytest.approx(1e-3, rel=1e-3)


def test_compare_nan_and_inf_positions_must_match() -> None:
    tol = Calibration(override=Tolerance(1e-2, 1e-2))
    ref = np.array([1.0, np.nan, np.inf, 4.0], dtype=np.float32)
    assert compare(raw(ref), raw(ref.copy()), "float32", tol).ok
    moved = np.array([1.0, 2.0, np.inf, np.nan], dtype=np.float32)
    assert compare(raw(ref), raw(moved), "float32", tol).first_bad_index == 1
    flipped = np.array([1.0, np.nan, -np.inf, 4.0], dtype=np.float32)
    assert compare(raw(ref), raw(flipped), "float32", tol).first_bad_index == 2


def test_compare_integers_exact_and_vector_index() -> None:
    ref = np.arange(16, dtype=np.int32)
    got = ref.copy()
    got[9] += 1
    cmp = compare(raw(ref), raw(got), "int4", Calibration())
    assert not cmp.ok and cmp.first_bad_index == 2  # element 9 is lane 1 of vector 2


def calibrated(
    ref: np.ndarray, moved: np.ndarray, n: int = 1, rho: float = PERTURBATION, allowed: float = 0.0
) -> Calibration:
    return Calibration(raw(moved), rho, n, allowed_roundoff=allowed)


def test_compare_fp16_and_bf16_at_their_own_precision() -> None:
    rng = np.random.default_rng(3)
    ref = np.linspace(0.1, 1, 50).astype(np.float16)
    moved = perturb(ref, "float16", 2.0**-9, rng)
    one_ulp = np.nextafter(ref, np.float16(2))
    assert compare(raw(ref), raw(one_ulp), "float16", calibrated(ref, moved, rho=2.0**-9)).ok
    assert not compare(
        raw(ref), raw(ref + np.float16(0.01)), "float16", calibrated(ref, moved, rho=2.0**-9)
    ).ok
    bref = bf16_from_f32(np.linspace(1, 2, 50, dtype=np.float32))
    bmoved = perturb(bref, "bfloat16", 2.0**-6, rng)
    worse = bf16_from_f32(f32_from_bf16(bref) * np.float32(1.05))
    assert compare(raw(bref), raw(bref), "bfloat16", calibrated(bref, bmoved, rho=2.0**-6)).ok
    assert not compare(raw(bref), raw(worse), "bfloat16", calibrated(bref, bmoved, rho=2.0**-6)).ok


def row_sums(x: np.ndarray, lanes: int = 1) -> np.ndarray:
    """fp32 row sums: sequentially (``lanes`` 1), or like a warp: strided partials, then a tree."""
    part = np.zeros((x.shape[0], lanes), np.float32)
    for j in range(0, x.shape[1], lanes):
        block = x[:, j : j + lanes]
        part[:, : block.shape[1]] += block
    while lanes > 1:
        lanes //= 2
        part[:, :lanes] += part[:, lanes : 2 * lanes]
    return part[:, 0]


@pytest.mark.parametrize("low", [-1.0, 0.0])  # terms of both signs (cancellation), or all positive
def test_reordered_row_sum_of_1000_terms_passes_the_calibrated_bound(low: float) -> None:
    rng = np.random.default_rng(1)
    x = rng.uniform(low, 1.0, (2048, 1000)).astype(np.float32)
    ref = row_sums(x)
    moved = row_sums(perturb(x.ravel(), "float32", PERTURBATION, rng).reshape(x.shape))
    reordered = row_sums(x, lanes=32)
    assert not np.array_equal(ref, reordered) and np.abs(ref - reordered).max() > 1e-5  # beyond the old atol
    cmp = compare(raw(ref), raw(reordered), "float32", calibrated(ref, moved, n=1000))
    assert cmp.ok and cmp.error_ratio < 0.5 and cmp.norm_err < cmp.norm_bound
    fp16_sum = np.zeros(x.shape[0], np.float16)
    for j in range(x.shape[1]):
        fp16_sum += x[:, j].astype(np.float16)
    cmp = compare(raw(ref), raw(fp16_sum.astype(np.float32)), "float32", calibrated(ref, moved, n=1000))
    assert not cmp.ok and cmp.error_ratio > 10 and "bound" in cmp.detail


def test_fp16_intermediate_saxpy_fails_and_fma_passes() -> None:
    rng = np.random.default_rng(2)
    a, x, y = (
        np.float32(2.5),
        rng.uniform(-1, 1, 1 << 16).astype(np.float32),
        rng.uniform(-1, 1, 1 << 16).astype(np.float32),
    )
    ref = a * x + y
    moved = a * perturb(x, "float32", PERTURBATION, rng) + perturb(y, "float32", PERTURBATION, rng)
    calib = calibrated(ref, moved, n=2)
    fused = (np.float64(a) * x + y).astype(np.float32)  # one rounding instead of two
    assert compare(raw(ref), raw(fused), "float32", calib).ok
    half = (np.float16(a) * x.astype(np.float16) + y.astype(np.float16)).astype(np.float32)
    cmp = compare(raw(ref), raw(half), "float32", calib)
    assert not cmp.ok and cmp.norm_err > 100 * cmp.norm_bound


def tf32(v: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(v, np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def test_tf32_matmul_fails_by_default_and_passes_when_allowed() -> None:
    rng = np.random.default_rng(4)
    a, b = (rng.uniform(-1, 1, (256, 256)).astype(np.float32) for _ in range(2))
    ref = a @ b
    pa, pb = (perturb(m.ravel(), "float32", PERTURBATION, rng).reshape(m.shape) for m in (a, b))
    moved = pa @ pb
    exact = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    assert compare(raw(ref), raw(exact), "float32", calibrated(ref, moved, n=256)).ok
    low = (tf32(a).astype(np.float64) @ tf32(b).astype(np.float64)).astype(np.float32)
    assert not compare(raw(ref), raw(low), "float32", calibrated(ref, moved, n=256)).ok
    allowed = calibrated(ref, moved, n=256, allowed=allowed_roundoff({"tf32": "wmma"}, ("tf32",)))
    assert compare(raw(ref), raw(low), "float32", allowed).ok


def test_zeros_for_tiny_outputs_are_refused_even_under_a_loose_override() -> None:
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, 4096).astype(np.float32)
    ref, moved = x * np.float32(1e-7), perturb(x, "float32", PERTURBATION, rng) * np.float32(1e-7)
    zeros = np.zeros_like(ref)
    assert not compare(raw(ref), raw(zeros), "float32", calibrated(ref, moved)).ok
    loose = compare(raw(ref), raw(zeros), "float32", Calibration(override=Tolerance(1e-5, 1e-5)))
    assert not loose.ok and loose.detail.startswith("no signal")
    const = np.full_like(ref, np.float32(3e-8))
    assert not compare(raw(ref), raw(const), "float32", Calibration(override=Tolerance(1e-5, 1e-5))).ok


def test_override_keys_keep_their_defaults() -> None:
    ref = np.linspace(1, 2, 100, dtype=np.float32)
    off = ref * np.float32(1 + 3e-4)
    assert not compare(raw(ref), raw(off), "float32", Calibration(raw(ref), PERTURBATION, 1)).ok
    assert compare(raw(ref), raw(off), "float32", Calibration(override=Tolerance(rtol=1e-3))).ok
    norm_only = Calibration(override=Tolerance(rtol=1e-3, norm=1e-4))  # elementwise fine, norm not
    cmp = compare(raw(ref), raw(off), "float32", norm_only)
    assert not cmp.ok and "relative L2" in cmp.detail and cmp.norm_bound == 1e-4
    assert Tolerance(rtol=1e-3, norm=1e-4, arg="y").text() == "arg=y rtol=0.001 norm=0.0001"


def test_integer_outputs_exact_unless_overridden() -> None:
    ref = np.arange(10, dtype=np.int64)
    got = ref.copy()
    got[3] = 4
    assert not compare(raw(ref), raw(got), "int64", Calibration()).ok
    assert compare(raw(ref), raw(got), "int64", Calibration(override=Tolerance(atol=1))).ok


def test_perturb_moves_floats_only_and_keeps_zeros() -> None:
    rng = np.random.default_rng(6)
    x = np.array([0.0, 1.0, -2.0, np.inf, np.nan], dtype=np.float32)
    moved = perturb(x, "float32", 2.0**-10, rng)
    assert moved[0] == 0 and np.isinf(moved[3]) and np.isnan(moved[4])
    assert np.allclose(np.abs(moved[1:3] / x[1:3] - 1), 2.0**-10, rtol=1e-3)
    ints = np.arange(5, dtype=np.int32)
    assert perturb(ints, "int32", 2.0**-10, rng) is ints


def test_reduction_length_from_shapes_and_work() -> None:
    assert reduction_length(vadd_problem(1000)) == 2  # two inputs per output
    from dataclasses import replace

    rows = replace(vadd_problem(1000), sizes={"rows": 8, "cols": 1000})
    assert reduction_length(rows) == 1000
    assert reduction_length(replace(vadd_problem(1000), flops=2 * 1000 * 64)) == 64


def test_precision_features_from_source_ptx_and_options() -> None:
    plain = KernelSource("__global__ void k(float* y) { float half = 0.5f; y[0] = expf(half); }", "k")
    assert precision_features(plain) == {}
    src = (
        "// __float2half in a comment does not count\n"
        "__global__ void k(float* y) { __half h = __float2half(y[0]); y[0] = __expf(__half2float(h));\n"
        ' asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0}, {%1}, {%2}, {%3};"); }'
    )
    found = precision_features(KernelSource(src, "k", options=("--use_fast_math",)))
    assert found["fp16"] == "__half" and found["fast-math"] == "--use_fast_math"
    assert found["mma"].startswith("mma.sync") and "tf32" in found
    assert lower_precision(KernelSource(src, "k"), KernelSource(src, "k")) == {}
    assert set(lower_precision(plain, KernelSource(src, "k"))) == {"fp16", "fast-math", "mma", "tf32"}
    for tanh in ("y[0] = __tanhf(y[0]);", 'asm("tanh.approx.f32 %0, %0;");'):  # fast tanh, C or PTX
        found = precision_features(KernelSource(f"__global__ void k(float* y) {{ {tanh} }}", "k"))
        assert set(found) == {"fast-math"}
    assert allowed_roundoff({"tf32": "x"}, ("tf32",)) == 2.0**-11
    assert allowed_roundoff({"tf32": "x", "fp16": "y"}, ("tf32",)) == 0.0  # fp16 not allowed


def test_unwritten_needs_both_poisons() -> None:
    n = 8
    a = np.full(4 * n, POISON_A, dtype=np.uint8)
    b = np.full(4 * n, POISON_B, dtype=np.uint8)
    a[:20] = 0  # elements 0..4 written in run A
    b[:20] = 0
    assert unwritten(a, b, 4) == 5
    b[20:] = 1  # written in run B: no longer "unwritten"
    assert unwritten(a, b, 4) == -1
    # a kernel that legitimately writes -1 (all 0xFF) writes it in both runs: not unwritten
    minus_one = np.full(4 * n, 0xFF, dtype=np.uint8)
    assert unwritten(minus_one, minus_one, 4) == -1


CDP = """
__global__ void child(float* y, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 1.0f; }
extern "C" __global__ void parent(float* y, int n) { if (threadIdx.x == 0) child<<<(n + 255) / 256, 256>>>(y, n); }
"""


def test_static_rules_reject_dynamic_parallelism() -> None:
    compiled = compile_cuda(CDP, name_expressions=("parent",), options=("-rdc=true",))
    assert compiled.result.ok
    by_option = static_rejection(KernelSource(CDP, "parent", options=("-rdc=true",)), compiled.binary)
    assert "-rdc=true" in by_option
    by_symbol = static_rejection(KernelSource(CDP, "parent"), compiled.binary)
    assert "cudaLaunchDevice" in by_symbol or "cudaGetParameterBuffer" in by_symbol
    plain = compile_cuda('extern "C" __global__ void k(float* y) { y[0] = 1.0f; }', name_expressions=("k",))
    assert static_rejection(KernelSource("", "k"), plain.binary) == ""


@pytest.mark.parametrize("itemsize", [2, 8, 12, 16])
def test_unwritten_compares_whole_elements_of_any_width(itemsize: int) -> None:
    n = 6
    a = np.full(itemsize * n, POISON_A, dtype=np.uint8)
    b = np.full(itemsize * n, POISON_B, dtype=np.uint8)
    a[: 3 * itemsize] = b[: 3 * itemsize] = 0  # elements 0..2 written in both runs
    a[3 * itemsize] = b[3 * itemsize] = 0  # element 3: only its first byte written
    assert unwritten(a, b, itemsize) == 4
    a[-1] = b[-1] = 0  # the last byte of element 5 written: 4 is still the first unwritten one
    assert unwritten(a, b, itemsize) == 4
    a[4 * itemsize :] = b[4 * itemsize :] = 0
    assert unwritten(a, b, itemsize) == -1


def test_normal_draws_follow_the_interval() -> None:
    x = generate(
        ArgSpec("x", "in", "float32", 200_000, Distribution("normal", -1.0, 3.0)), np.random.default_rng(3)
    )
    assert x.dtype == np.float32
    assert abs(float(x.mean()) - 1.0) < 0.02 and abs(float(x.std()) - 2.0) < 0.02
    h = generate(
        ArgSpec("h", "in", "float16", 1000, Distribution("uniform", -1.0, 1.0)), np.random.default_rng(3)
    )
    assert h.dtype == np.float16 and h.min() >= -1.0 and h.max() <= 1.0
