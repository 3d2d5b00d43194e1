"""Verification logic on numpy arrays (no GPU): element types, input generation, tolerance,
comparison, unwritten-output detection, and the static rules on real NVRTC output."""

from __future__ import annotations

import numpy as np
import pytest
from sandbox_fakes import vadd_problem

from sandbox.compiler import compile_cuda
from sandbox.contract import ArgSpec, Distribution, KernelSource, Tolerance
from sandbox.verify import (
    POISON_A,
    POISON_B,
    bf16_from_f32,
    compare,
    default_tolerance,
    elem_type,
    f32_from_bf16,
    generate,
    inputs_for,
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


def test_default_tolerances() -> None:
    assert default_tolerance("float32") == Tolerance(1e-5, 1e-5)
    assert default_tolerance("float4") == Tolerance(1e-5, 1e-5)
    assert default_tolerance("float16") == Tolerance(1e-2, 1e-2)
    assert default_tolerance("bfloat16") == Tolerance(1e-2, 1e-2)
    assert default_tolerance("int32") == Tolerance(0.0, 0.0)


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
    tol = Tolerance(1e-5, 1e-5)
    assert compare(raw(ref), raw(ref + np.float32(5e-6)), "float32", tol).ok
    got = ref.copy()
    got[37] += 1e-3
    cmp = compare(raw(ref), raw(got), "float32", tol)
    assert not cmp.ok and cmp.first_bad_index == 37
    assert cmp.max_abs_err == pytest.approx(1e-3, rel=1e-3)


def test_compare_nan_and_inf_positions_must_match() -> None:
    tol = Tolerance(1e-2, 1e-2)
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
    cmp = compare(raw(ref), raw(got), "int4", default_tolerance("int4"))
    assert not cmp.ok and cmp.first_bad_index == 2  # element 9 is lane 1 of vector 2


def test_compare_fp16_and_bf16() -> None:
    ref = np.linspace(0, 1, 50).astype(np.float16)
    assert compare(raw(ref), raw(ref + np.float16(0.004)), "float16", default_tolerance("float16")).ok
    assert not compare(raw(ref), raw(ref + np.float16(0.1)), "float16", default_tolerance("float16")).ok
    bref = bf16_from_f32(np.linspace(1, 2, 50, dtype=np.float32))
    worse = bf16_from_f32(f32_from_bf16(bref) * np.float32(1.05))
    assert compare(raw(bref), raw(bref), "bfloat16", default_tolerance("bfloat16")).ok
    assert not compare(raw(bref), raw(worse), "bfloat16", default_tolerance("bfloat16")).ok


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
