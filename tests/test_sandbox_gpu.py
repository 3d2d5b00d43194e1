"""The sandbox on a real GPU: an honest faster rewrite is accepted with its speedup; every kernel
under tests/data/adversarial/ is refused with the right status, and the worker keeps serving."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from sandbox_fakes import kernel_file, vadd_problem, vadd_request

from sandbox.contract import (
    ArgSpec,
    Budget,
    Candidate,
    EvalOptions,
    EvalRequest,
    EvalResult,
    KernelSource,
    Launch,
    Problem,
    Status,
)
from sandbox.executor import ExecutorError
from sandbox.local import LocalExecutor, bench_request

pytestmark = pytest.mark.gpu

ADV = Path(__file__).parent / "data" / "adversarial"
HONEST = Path(__file__).parent / "data" / "sandbox"
RDC = ("-rdc=true",)


@pytest.fixture(scope="module")
def executor() -> Iterator[LocalExecutor]:
    with LocalExecutor() as ex:
        yield ex  # type: ignore[misc]


def adversarial(name: str, kernel: str = "vadd", options: tuple[str, ...] = ()) -> Candidate:
    return Candidate(name, kernel_file(ADV / f"{name}.cu", kernel, options))


def by_id(result: EvalResult) -> dict[str, object]:
    return {c.candidate_id: c for c in result.candidates}


def test_device_ceilings_measured(executor: LocalExecutor) -> None:
    info = executor.device_info()
    assert info.sm_count > 0 and info.l2_bytes > 0
    assert info.peak_bandwidth_gbps > 500 and info.peak_gflops > 1000


def grid_stride_launch(n: int) -> Launch:
    return Launch((max(1, min((n // 4 + 255) // 256, 132 * 8)), 1, 1), (256, 1, 1))


def test_faster_candidate_accepted_with_speedup(executor: LocalExecutor) -> None:
    baseline = kernel_file(HONEST / "vadd.cu", "vadd")
    sizes = (1, 4097, (1 << 20) + 3)
    bench = 1 << 24
    launches = tuple(grid_stride_launch(n) for n in (*sizes, bench))
    good = Candidate("grid_stride", kernel_file(HONEST / "vadd_grid_stride.cu", "vadd"), launches)
    same = Candidate("same", baseline)
    request = vadd_request(baseline, (good, same), sizes=sizes, bench=bench, block=32)
    result = executor.evaluate(request)
    assert result.baseline.status == Status.OK, result.baseline.message
    assert result.baseline.timing is not None and result.baseline.achieved_gbps > 0
    g, s = result.candidates
    assert g.status == Status.OK, g.message
    # three verification sizes on every seed, the benchmark size on the first (its timed runs
    # then compare the candidate's outputs with the baseline's on every rotated slot)
    assert len(g.checks) == 3 * 3 + 1 and all(c.ok for c in g.checks)
    assert g.timing is not None and g.baseline_timing is not None
    assert g.speedup > 1.5 and g.speedup_low <= g.speedup <= g.speedup_high
    assert g.pct_peak_bandwidth > 30
    assert s.status == Status.OK and 0.9 < s.speedup < 1.1


def test_adversarial_vadd_kernels_rejected(executor: LocalExecutor) -> None:
    baseline = kernel_file(HONEST / "vadd.cu", "vadd")
    honest = Candidate("honest", baseline)
    cands = (
        adversarial("output_not_written"),
        adversarial("out_of_bounds_write"),
        adversarial("input_modified"),
        adversarial("side_stream", options=RDC),
        adversarial("dynamic_parallelism", options=RDC),
        adversarial("cached_global"),
        adversarial("precision_downgrade"),
        adversarial("wrong_tail"),
        adversarial("illegal_address"),
        Candidate("honest_after_crash", baseline),
        adversarial("infinite_loop"),
        Candidate("honest_after_timeout", baseline),
        adversarial("hardcoded_size"),
        honest,
    )
    request = vadd_request(baseline, cands, sizes=(1, 4097), bench=1 << 16, budget=Budget(timeout_s=8.0))
    r = by_id(executor.evaluate(request))

    def expect(cid: str, statuses: set[Status], text: str = "") -> None:
        res = r[cid]
        assert res.status in statuses, f"{cid}: {res.status} {res.message}"  # type: ignore[attr-defined]
        assert text in res.message, f"{cid}: {res.message}"  # type: ignore[attr-defined]

    expect("output_not_written", {Status.REJECTED}, "not written")
    expect("out_of_bounds_write", {Status.REJECTED}, "out-of-bounds")
    expect("input_modified", {Status.REJECTED}, "input `a` was modified")
    expect("side_stream", {Status.REJECTED}, "not allowed")
    expect("dynamic_parallelism", {Status.REJECTED}, "not allowed")
    expect("cached_global", {Status.MISMATCH, Status.REJECTED})
    expect("precision_downgrade", {Status.MISMATCH}, "mismatch")
    expect("wrong_tail", {Status.REJECTED, Status.MISMATCH}, "n=")
    assert "n=65536" not in r["wrong_tail"].message  # type: ignore[attr-defined]
    expect("illegal_address", {Status.CRASH})
    expect("honest_after_crash", {Status.OK})
    expect("infinite_loop", {Status.TIMEOUT}, "deadline")
    expect("honest_after_timeout", {Status.OK})
    expect("hardcoded_size", {Status.REJECTED, Status.CRASH, Status.MISMATCH})
    expect("honest", {Status.OK})


def test_wrong_tail_passes_at_multiples_of_four_only(executor: LocalExecutor) -> None:
    """Why verification sizes include awkward ones: at friendly sizes the buggy kernel passes."""
    baseline = kernel_file(HONEST / "vadd.cu", "vadd")
    friendly = vadd_request(baseline, (adversarial("wrong_tail"),), sizes=(256, 4096), bench=1 << 16)
    result = executor.evaluate(friendly)
    assert result.candidates[0].status == Status.OK, result.candidates[0].message


def block_sum_problem(n: int) -> Problem:
    blocks = (n + 255) // 256
    return Problem(
        label=f"n={n}",
        sizes={"n": n},
        args=(
            ArgSpec("x", "in", "float32", n),
            ArgSpec("out", "out", "float32", blocks),
            ArgSpec("n", "scalar", "int32", value=n),
        ),
        launch=Launch((blocks, 1, 1), (256, 1, 1)),
        bytes_moved=4 * n + 4 * blocks,
        flops=n,
    )


def test_shared_memory_bugs_rejected(executor: LocalExecutor) -> None:
    baseline = kernel_file(HONEST / "block_sum.cu", "block_sum")
    request = EvalRequest(
        id="block_sum",
        baseline=baseline,
        candidates=(
            adversarial("uninitialized_shared", "block_sum"),
            adversarial("shared_race", "block_sum"),
            Candidate("honest", baseline),
        ),
        verify_problems=(block_sum_problem(1000), block_sum_problem(70_001)),
        bench_problem=block_sum_problem(1 << 20),
        options=EvalOptions(sanitize=True),
    )
    result = executor.evaluate(request)
    assert result.baseline.status == Status.OK, result.baseline.message
    uninit, race, honest = result.candidates
    assert uninit.status in (Status.MISMATCH, Status.REJECTED), uninit.message
    assert race.status in (Status.MISMATCH, Status.REJECTED), race.message
    assert honest.status == Status.OK, honest.message
    assert "racecheck" in honest.sanitizer and "0 errors" in honest.sanitizer


def test_memory_cap_is_enforced(executor: LocalExecutor) -> None:
    baseline = kernel_file(HONEST / "vadd.cu", "vadd")
    request = vadd_request(
        baseline, (Candidate("honest", baseline),), bench=1 << 24, budget=Budget(gpu_memory_bytes=64 << 20)
    )
    with pytest.raises(ExecutorError, match="bytes of arrays, more than the memory cap of 67108864"):
        executor.evaluate(request)  # refused at the boundary, before anything is allocated


def test_bench_request_times_the_kernel_alone(executor: LocalExecutor) -> None:
    result = executor.evaluate(bench_request(kernel_file(HONEST / "vadd.cu", "vadd"), vadd_problem(1 << 24)))
    b = result.baseline
    assert b.status == Status.OK and b.timing is not None and len(b.checks) == 1
    assert b.achieved_gbps > 100 and 0 < b.pct_peak_bandwidth < 110


def test_template_kernel_by_name_expression(executor: LocalExecutor) -> None:
    src = (
        (HONEST / "vadd.cu")
        .read_text()
        .replace('extern "C" __global__ void vadd', "template <typename T>\n__global__ void vadd_t")
    )
    src = src.replace("const float*", "const T*").replace("float*", "T*")
    templ = KernelSource(src, "vadd_t<float>")
    request = vadd_request(kernel_file(HONEST / "vadd.cu", "vadd"), (Candidate("template", templ),))
    result = executor.evaluate(request)
    assert result.candidates[0].status == Status.OK, result.candidates[0].message


def test_nsight_compute_profile_of_a_verified_candidate(executor: LocalExecutor) -> None:
    """`EvalOptions.profile`: the candidate launched once under ncu in the worker's sandbox; where
    ncu is missing the result says so instead."""
    from sandbox.profile import find_ncu

    baseline = kernel_file(HONEST / "vadd.cu", "vadd")
    sizes, bench = (4097,), 1 << 24
    launches = tuple(grid_stride_launch(n) for n in (*sizes, bench))
    good = Candidate("grid_stride", kernel_file(HONEST / "vadd_grid_stride.cu", "vadd"), launches)
    request = vadd_request(baseline, (good,), sizes=sizes, bench=bench, block=32)
    request = EvalRequest(**{**request.__dict__, "options": EvalOptions(profile=True, time=False)})
    (result,) = executor.evaluate(request).candidates
    assert result.status == Status.OK, result.message
    p = result.profile
    assert p is not None
    if find_ncu() is None:
        assert not p.available and "not installed" in p.message
        return
    assert p.available, p.message
    assert 20 < p.memory_pct <= 100 and 0 < p.compute_pct <= 100 and p.duration_us > 0
    assert 0 < p.achieved_occupancy_pct <= 100 and 0 <= p.l2_hit_pct <= 100
    assert p.stalls and p.stalls[0].per_issue > 0


# --------------------------------------------------------------------------- verification on the device


def test_device_compare_matches_the_host_compare_on_10000_random_cases() -> None:
    """The device comparison (CuPy arrays through the same code) against the host's (numpy), the
    oracle: the same verdict, first bad index and message on every case of tests/compare_cases.py
    (every type, NaN/Inf/denormals/-0.0, masks, overrides, tiny outputs, reordered sums)."""
    from dataclasses import replace

    import cupy as cp
    from compare_cases import case

    from sandbox.verify import compare

    rng = np.random.default_rng(20261203)
    verdicts = {True: 0, False: 0}
    for k in range(10_000):
        c = case(rng)
        host = compare(c.ref, c.got, c.dtype, c.calib, c.cared)
        moved = None if c.calib.perturbed is None else cp.asarray(c.calib.perturbed)
        dev = compare(
            cp.asarray(c.ref),
            cp.asarray(c.got),
            c.dtype,
            replace(c.calib, perturbed=moved),
            None if c.cared is None else cp.asarray(c.cared),
        )
        got, want = (dev.ok, dev.first_bad_index, dev.detail), (host.ok, host.first_bad_index, host.detail)
        assert got == want, f"case {k} ({c.dtype}, {c.mode}): device {got} != host {want}"
        assert dev.error_ratio == pytest.approx(host.error_ratio, rel=1e-9, abs=1e-300), (
            f"case {k} ({c.dtype}, {c.mode})"
        )
        assert dev.norm_err == pytest.approx(host.norm_err, rel=1e-9, abs=1e-300)
        verdicts[host.ok] += 1
    assert min(verdicts.values()) > 2000  # both verdicts well represented


def test_device_draws_are_the_host_draws_bit_for_bit() -> None:
    """Same seed, same inputs on every executor: every distribution of the grammar and every
    element type drawn with CuPy equals the numpy draw, and so does the calibration's perturbation."""
    import cupy as cp

    from sandbox.contract import ArgSpec, Distribution
    from sandbox.draws import Stream, generate
    from sandbox.verify import perturb

    dists = (
        Distribution("uniform", -2.0, 3.0),
        Distribution("normal", -1.0, 3.0),
        Distribution("randint", -50, 70),
        Distribution("const", value=2.5),
        Distribution("arange"),
        Distribution("values", expr="(i % 17) * 0.25 - 1"),
    )
    types = (
        "float32",
        "float64",
        "float16",
        "bfloat16",
        "int8",
        "int32",
        "uint16",
        "int64",
        "bool",
        "float4",
        "half2",
        "uint2",
    )
    for dist in dists:
        for dtype in types:
            arg = ArgSpec("x", "in", dtype, 100_003, dist)
            host = generate(arg, Stream(7, 3))
            dev = generate(arg, Stream(7, 3), cp)
            assert host.dtype == dev.dtype and np.array_equal(
                host.view(np.uint8), cp.asnumpy(dev).view(np.uint8)
            ), (dist, dtype)
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        data = generate(ArgSpec("x", "in", dtype, 50_001, Distribution("normal")), Stream(1, 0))
        host = perturb(data, dtype, 2.0**-10, Stream(1, 104729))
        dev = perturb(cp.asarray(data), dtype, 2.0**-10, Stream(1, 104729))
        assert np.array_equal(host.view(np.uint8), cp.asnumpy(dev).view(np.uint8)), dtype


PLANTED = r"""
// vadd that skips the work on large problems: verification sizes pass, the timed one does nothing
extern "C" __global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                                float* __restrict__ c, int n) {
    if (n > (1 << 20)) return;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""


def test_the_physics_floor_refuses_a_planted_no_work_kernel_under_a_weakened_comparison(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the comparisons weakened to always pass (verification and the timed re-check), only
    the floor stands between a kernel that does nothing on the timed problem and a huge speedup:
    it is refused as ``implausible`` with the numbers; the honest kernel is not."""
    import sandbox.gpu_handler
    import sandbox.verify
    from sandbox.compiler import compile_cuda
    from sandbox.contract import CandidateResult
    from sandbox.gpu_handler import GpuHandler
    from sandbox.timing import physics_floor, with_throughput
    from sandbox.verify import Agreement, Verdict
    from sandbox.wire import Binary, EvalJob

    handler = GpuHandler(0, "cupy")
    info = handler.describe(handler.info)
    arch = "sm_" + info.compute_capability.replace(".", "")

    def binary(source: str) -> Binary:
        compiled = compile_cuda(source, name_expressions=("vadd",), arch=arch)
        assert compiled.result.ok, compiled.result.log
        return Binary(compiled.binary, compiled.result.lowered_names.get("vadd", "vadd"))

    monkeypatch.setattr(sandbox.verify.Verifier, "verify", lambda self, *a, **k: Verdict(None))
    monkeypatch.setattr(sandbox.verify, "compare", lambda *a, **k: Agreement(True, norm_bound=np.inf))
    monkeypatch.setattr(sandbox.gpu_handler, "compare", lambda *a, **k: Agreement(True, norm_bound=np.inf))
    baseline_source = (HONEST / "vadd.cu").read_text()
    honest = kernel_file(HONEST / "vadd.cu", "vadd")
    planted = KernelSource(PLANTED, "vadd", filename="planted.cu")
    request = vadd_request(
        honest, (Candidate("planted", planted), Candidate("honest", honest)), bench=1 << 26
    )
    results: dict[str, CandidateResult] = {}
    for index, source in ((0, PLANTED), (1, baseline_source)):
        job = EvalJob(request, binary(baseline_source), index, binary(source))
        timed = handler.evaluate(job)
        assert timed.status is Status.OK, timed.message  # the weakened comparison let it through
        results[timed.candidate_id] = physics_floor(
            with_throughput(timed, request.bench_problem, info), request.bench_problem
        )
    refused, kept = results["planted"], results["honest"]
    assert refused.status is Status.IMPLAUSIBLE and "implausible" in refused.message
    assert "GB/s" in refused.message and "% of the device's measured copy bandwidth" in refused.message
    assert kept.status is Status.OK and kept.pct_peak_bandwidth < 110


def test_adversarial_kernels_get_the_same_verdicts_verified_on_the_device_and_on_the_host() -> None:
    """The worker's own handler verifies each deterministic adversarial kernel with every problem
    on the device (``device_min_bytes=0``) and on the host: the same status and the same message
    (which names the check, the problem, the seed, the index and the values)."""
    from sandbox.compiler import compile_cuda
    from sandbox.gpu_handler import GpuHandler
    from sandbox.wire import Binary, EvalJob

    handler = GpuHandler(0, "cupy")
    arch = "sm_" + handler.info.compute_capability.replace(".", "")

    def binary(kernel: KernelSource) -> Binary:
        compiled = compile_cuda(kernel.source, name_expressions=(kernel.name,), arch=arch)
        assert compiled.result.ok, compiled.result.log
        return Binary(compiled.binary, compiled.result.lowered_names.get(kernel.name, kernel.name))

    baseline = kernel_file(HONEST / "vadd.cu", "vadd")
    names = (
        "output_not_written",
        "out_of_bounds_write",
        "input_modified",
        "cached_global",
        "precision_downgrade",
        "wrong_tail",
    )
    cands = (*(adversarial(n) for n in names), Candidate("honest", baseline))
    request = vadd_request(baseline, cands, sizes=(1, 4097), bench=1 << 18)
    verdicts: dict[str, list[tuple[Status, str]]] = {}
    for device in (True, False):
        handler.device_verify, handler.device_min_bytes, handler._state = device, 0, None
        for index, cand in enumerate(cands):
            res = handler.evaluate(EvalJob(request, binary(baseline), index, binary(cand.kernel)))
            verdicts.setdefault(cand.id, []).append((res.status, res.message))
    for cid, (dev, host) in verdicts.items():
        assert dev == host, f"{cid}: device {dev} != host {host}"
    assert verdicts["output_not_written"][0][0] is Status.REJECTED
    assert verdicts["precision_downgrade"][0][0] is Status.MISMATCH
    assert verdicts["honest"][0][0] is Status.OK
