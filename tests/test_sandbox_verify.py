"""Verification logic on numpy arrays (no GPU): element types, input generation, tolerance,
comparison, unwritten-output detection, and the static rules on real NVRTC output."""

from __future__ import annotations

import numpy as np
import pytest
from sandbox_fakes import HostRuntime, vadd_problem

from sandbox.compiler import compile_cuda
from sandbox.contract import ArgSpec, Distribution, KernelSource, Status, Tolerance
from sandbox.draws import Stream, bf16_from_f32, elem_type, f32_from_bf16, generate, inputs_for
from sandbox.precision import allowed_roundoff, lower_precision, precision_features
from sandbox.verify import (
    PERTURBATION,
    POISON_A,
    POISON_B,
    Calibration,
    Verifier,
    Workspace,
    compare,
    perturb,
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
    a = generate(arg, Stream(1, 0))
    b = generate(arg, Stream(1, 0))
    c = generate(arg, Stream(2, 0))
    assert a.dtype == np.float32 and a.size == 1000
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.min() >= -2.0 and a.max() < 3.0


def test_generate_integers_vectors_and_constants() -> None:
    rng = Stream(0, 0)
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
    ref = np.linspace(0.1, 1, 50).astype(np.float16)
    moved = perturb(ref, "float16", 2.0**-9, Stream(9, 109))
    one_ulp = np.nextafter(ref, np.float16(2))
    assert compare(raw(ref), raw(one_ulp), "float16", calibrated(ref, moved, rho=2.0**-9)).ok
    assert not compare(
        raw(ref), raw(ref + np.float16(0.01)), "float16", calibrated(ref, moved, rho=2.0**-9)
    ).ok
    bref = bf16_from_f32(np.linspace(1, 2, 50, dtype=np.float32))
    bmoved = perturb(bref, "bfloat16", 2.0**-6, Stream(9, 890))
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
    moved = row_sums(perturb(x.ravel(), "float32", PERTURBATION, Stream(9, 964)).reshape(x.shape))
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
    moved = a * perturb(x, "float32", PERTURBATION, Stream(9, 589)) + perturb(
        y, "float32", PERTURBATION, Stream(9, 837)
    )
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
    pa, pb = (perturb(m.ravel(), "float32", PERTURBATION, Stream(9, 818)).reshape(m.shape) for m in (a, b))
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
    ref, moved = x * np.float32(1e-7), perturb(x, "float32", PERTURBATION, Stream(9, 589)) * np.float32(1e-7)
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
    x = np.array([0.0, 1.0, -2.0, np.inf, np.nan], dtype=np.float32)
    moved = perturb(x, "float32", 2.0**-10, Stream(9, 288))
    assert moved[0] == 0 and np.isinf(moved[3]) and np.isnan(moved[4])
    assert np.allclose(np.abs(moved[1:3] / x[1:3] - 1), 2.0**-10, rtol=1e-3)
    ints = np.arange(5, dtype=np.int32)
    assert perturb(ints, "int32", 2.0**-10, Stream(9, 439)) is ints


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
    x = generate(ArgSpec("x", "in", "float32", 200_000, Distribution("normal", -1.0, 3.0)), Stream(3, 0))
    assert x.dtype == np.float32
    assert abs(float(x.mean()) - 1.0) < 0.02 and abs(float(x.std()) - 2.0) < 0.02
    h = generate(ArgSpec("h", "in", "float16", 1000, Distribution("uniform", -1.0, 1.0)), Stream(3, 0))
    assert h.dtype == np.float16 and h.min() >= -1.0 and h.max() <= 1.0


def vadd(rt: HostRuntime, args: list[object]) -> None:
    a, b, c, n = (int(x) for x in args)  # type: ignore[call-overload]
    rt.array(c, "float32", n)[:] = rt.array(a, "float32", n) + rt.array(b, "float32", n)


def vadd_reordered(rt: HostRuntime, args: list[object]) -> None:  # a + b in the last bit
    a, b, c, n = (int(x) for x in args)  # type: ignore[call-overload]
    out = rt.array(a, "float32", n) + rt.array(b, "float32", n)
    rt.array(c, "float32", n)[:] = np.nextafter(out, np.float32(np.inf))


def vadd_wrong(rt: HostRuntime, args: list[object]) -> None:
    a, b, c, n = (int(x) for x in args)  # type: ignore[call-overload]
    rt.array(c, "float32", n)[:] = rt.array(a, "float32", n) - rt.array(b, "float32", n)


@pytest.mark.parametrize("tolerances, runs", [((), 2), ((Tolerance(atol=1e-5, rtol=1e-4),), 1)])
def test_the_calibration_run_is_made_only_for_outputs_it_bounds(
    tolerances: tuple[Tolerance, ...], runs: int
) -> None:
    """The baseline runs on perturbed inputs only when an output's bound is calibrated: with an
    elementwise tolerance for every output (or integer outputs) the run would cost as much as the
    reference itself at benchmark sizes, for nothing."""
    rt = HostRuntime()
    problem = vadd_problem(1000)
    verifier = Verifier(rt, [(problem, (1,))], vadd, tolerances, lambda pattern: None)  # type: ignore[arg-type]
    ws = Workspace(rt, problem)  # type: ignore[arg-type]
    ref, perturbed = verifier.reference(0, 1, ws)["c"]
    assert rt.launches == {"vadd": runs} and (perturbed is None) == (runs == 1)
    assert np.array_equal(ref.view(np.float32), verifier.inputs(0, 1)["a"] + verifier.inputs(0, 1)["b"])
    # candidates are judged as before: off by one ulp passes, a wrong sum does not
    assert verifier.verify(vadd_reordered, None).status is None  # type: ignore[arg-type]
    assert verifier.verify(vadd_wrong, None).status is Status.MISMATCH  # type: ignore[arg-type]
    assert rt.launches["vadd"] == runs  # the reference is computed once


def splitmix64_reference(state: int, count: int) -> list[int]:
    """splitmix64 as published (Steele, Lea, Flood 2014), on Python integers."""
    out = []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) % 2**64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % 2**64
        out.append(z ^ (z >> 31))
    return out


def test_stream_bits_are_splitmix64_from_the_streams_key() -> None:
    assert splitmix64_reference(0, 1) == [0xE220A8397B1DCDAF]  # the published first output
    for seed, stream in ((1, 0), (2, 7), (12345, 104729)):
        s = Stream(seed, stream)
        assert s.bits(5).tolist() == splitmix64_reference(s.key, 5)
        assert s.bits(3, part=2).tolist() == splitmix64_reference(s.key, 9)[6:]
    assert Stream(1, 0).key != Stream(0, 1).key != Stream(1, 1).key


def test_stream_distributions_are_pinned_and_follow_their_definition() -> None:
    s = Stream(3, 1)
    bits = s.bits(4)
    u32, u64 = s.uniform(4, np.float32), s.uniform(4, np.float64)
    assert u32.tolist() == [float(b >> 40) * 2.0**-24 for b in bits.tolist()]
    assert u64.tolist() == [float(b >> 11) * 2.0**-53 for b in bits.tolist()]
    ints = s.integers(-5, 7, 4)
    assert ints.tolist() == [b % 12 - 5 for b in bits.tolist()]
    parts = [s.bits(4, part=p).tolist() for p in range(3)]
    sums = [
        sum((w >> sh) & 0xFFFF for w in (parts[0][i], parts[1][i], parts[2][i]) for sh in (0, 16, 32, 48))
        for i in range(4)
    ]
    assert s.normal(4, np.float64).tolist() == [(2 * t - 12 * 65535) / 2**17 for t in sums]
    big = s.normal(400_000, np.float32)
    assert abs(float(big.mean())) < 0.01 and abs(float(big.std()) - 1.0) < 0.01 and np.abs(big).max() <= 6
    # pinned: the inputs a spec's seed 1 gives, on every executor (tests/test_sandbox_gpu.py draws
    # the same on the device)
    x = generate(ArgSpec("x", "in", "float32", 3, Distribution("uniform", -1.0, 1.0)), Stream(1, 0))
    assert x.tolist() == [
        float(np.float32(np.float32(float(b >> 40) * 2.0**-24) * np.float32(2)) + np.float32(-1))
        for b in Stream(1, 0).bits(3).tolist()
    ]


class FakeDeviceArray:
    """Stands for a CuPy array in the spill decision: a size and a way to the host."""

    def __init__(self, data: np.ndarray) -> None:
        self.data, self.nbytes = data, data.nbytes

    def get(self) -> np.ndarray:
        return self.data.copy()


def test_kept_data_spills_to_the_host_when_the_device_share_is_full_and_says_so() -> None:
    from sandbox.verify import keep_on_device

    assert keep_on_device(0, 100, 100) and not keep_on_device(1, 100, 100)
    rt = HostRuntime()
    verifier = Verifier(rt, [(vadd_problem(16), (1,))], None, (), lambda pattern: None, keep_bytes=1000)  # type: ignore[arg-type]
    assert verifier.device(0) is None and verifier.spill_note() == ""
    first = FakeDeviceArray(np.zeros(150, np.float32))  # 600 bytes: fits
    assert verifier.keep(first, "reference `c` of n=16, seed 1") is first and verifier.held == 600
    second = verifier.keep(FakeDeviceArray(np.ones(150, np.float32)), "reference `c` of n=16, seed 2")
    assert isinstance(second, np.ndarray) and second.sum() == 150 and verifier.held == 600
    note = verifier.spill_note()
    assert "kept on the host" in note and "seed 2" in note and "seed 1" not in note
    host = np.zeros(10)
    assert verifier.keep(host, "host data") is host and verifier.held == 600  # host data stays where it is


def test_differential_cases_cover_every_verdict_on_the_host() -> None:
    """The cases the device/host differential test (tests/test_sandbox_gpu.py) runs: every type
    and mode, and a real mix of verdicts (so agreeing on them means something)."""
    from compare_cases import DTYPES, MODES, case

    rng = np.random.default_rng(20261203)
    seen_types, seen_modes, details = set(), set(), []
    ok = 0
    for _ in range(1500):
        c = case(rng)
        cmp = compare(c.ref, c.got, c.dtype, c.calib, c.cared)
        seen_types.add(c.dtype)
        seen_modes.add(c.mode)
        ok += cmp.ok
        details.append(cmp.detail)
    assert seen_types == set(DTYPES) and seen_modes == set(MODES)
    assert 0.2 < ok / 1500 < 0.8
    for kind in (
        "integers must match exactly",
        "bound",
        "relative L2 error",
        "no signal",
        "expected nan",
        "expected inf",
    ):
        assert any(kind in d for d in details), kind


def test_float32_bits_become_float64_exactly_subnormals_signs_and_specials_included() -> None:
    """The device path's conversion (integer and float64 operations, since CuPy flushes float32
    subnormals) equals numpy's exact cast on every class of bit pattern."""
    from sandbox.draws import f64_from_f32_bits

    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    bits[:8] = [0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F800000, 0xFF800000, 0x7FC00000]
    with np.errstate(invalid="ignore"):  # numpy's cast of a signalling NaN says so: expected here
        want = bits.view(np.float32).astype(np.float64)
    got = f64_from_f32_bits(bits)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got[:7]), np.signbit(want[:7]))
