"""Verification you can trust, on a real GPU (issue 14's "Must show"): the calibrated tolerance
model accepts an honest reordering at the default tolerance and refuses precision downgrades and
outputs without signal; lower precision is named in the result and passes only where the spec
allows it; bf16 and integer outputs, `__constant__` data, accumulating `inout` arrays, dynamic
shared memory and 2-D/3-D launches are verified and timed.

Every kernel is a spec'd file under tests/data/trust/ and goes through the same path as
`cuda-agent compare FILE -k K --with K2` (spec -> problems -> sandbox)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import compare as cmp
from agent.target import target_for
from cudasrc.source import Document
from sandbox.contract import Candidate, CandidateResult, EvalResult, Status
from sandbox.local import LocalExecutor

pytestmark = pytest.mark.gpu

TRUST = Path(__file__).parent / "data" / "trust"


@pytest.fixture(scope="module")
def executor() -> Iterator[LocalExecutor]:
    with LocalExecutor() as ex:
        yield ex  # type: ignore[misc]


def compared(ex: LocalExecutor, file: str, kernel: str, rewrite: str) -> cmp.Comparison:
    """``cuda-agent compare tests/data/trust/FILE -k KERNEL --with REWRITE --no-sanitize``."""
    doc = Document.from_file(TRUST / file)
    target = target_for(doc, kernel)
    original = doc.kernel(kernel)
    assert original is not None
    proposal = cmp.candidate_proposal(target, original, doc, doc, cmp.find_kernel(doc, rewrite, "--with"))
    result = cmp.compare(target, proposal, ex, sanitize=False)
    assert result.result.baseline.status == Status.OK, result.result.baseline.message
    return result


def against_itself(ex: LocalExecutor, file: str, kernel: str) -> EvalResult:
    """The kernel verified and timed against itself (as an optimize candidate would be)."""
    target = target_for(Document.from_file(TRUST / file), kernel)
    result = ex.evaluate(target.request(f"self-{kernel}", (Candidate("self", target.baseline),)))
    assert result.baseline.status == Status.OK, result.baseline.message
    return result


def timed(c: CandidateResult) -> None:
    """Verified, timed interleaved with the baseline, a finite paired speedup."""
    assert c.status == Status.OK, c.message
    assert c.timing is not None and c.baseline_timing is not None and c.pairs > 0
    assert math.isfinite(c.speedup) and 0 < c.speedup_low <= c.speedup <= c.speedup_high


def test_reordered_row_sum_is_accepted_at_the_default_tolerance(executor: LocalExecutor) -> None:
    """1000 fp32 terms per row summed in another order (block per row, warp shuffles, dynamic
    shared memory): the results differ in the last bits, within the calibrated bound."""
    found = compared(executor, "rowsum.cu", "rowsum", "rowsum_block")
    assert found.target.tolerance is None and not found.target.tolerances  # the default model
    c = found.candidate
    timed(c)
    bench = [ch for ch in c.checks if ch.label == "rows=4096, cols=1000"]
    assert bench and all(ch.ok for ch in c.checks)
    # really reordered (not bit-identical), and the measured error stands next to its bound
    assert max(ch.max_abs_err for ch in c.checks) > 0
    assert all(0 <= ch.error_ratio < 1 and ch.norm_err <= ch.norm_bound for ch in c.checks)
    assert any("of its bound" in ch.detail for ch in c.checks)


def test_fp16_intermediate_saxpy_is_refused_unless_the_spec_allows_fp16(executor: LocalExecutor) -> None:
    refused = compared(executor, "saxpy_precision.cu", "saxpy", "saxpy_half").candidate
    assert refused.status == Status.MISMATCH, refused.message
    assert refused.precision.startswith("fp16") and "bound" in refused.message
    allowed = compared(executor, "saxpy_precision.cu", "saxpy_fp16_ok", "saxpy_half").candidate
    timed(allowed)
    assert allowed.precision.startswith("fp16")  # still said in the result


def test_tf32_matmul_is_refused_unless_the_spec_allows_tf32(executor: LocalExecutor) -> None:
    refused = compared(executor, "matmul_tf32.cu", "matmul", "matmul_tf32").candidate
    assert refused.status == Status.MISMATCH, refused.message
    assert refused.precision.startswith("tf32")
    allowed = compared(executor, "matmul_tf32.cu", "matmul_tf32_ok", "matmul_tf32").candidate
    timed(allowed)
    assert allowed.precision.startswith("tf32")
    # its FLOP rate is held to the tensor-core ceiling, not the FP32 one
    info = executor.device_info()
    ceiling = max(info.peak_tensor_gflops, info.peak_gflops)
    assert allowed.pct_peak_flops == pytest.approx(100 * allowed.achieved_gflops / ceiling, rel=1e-6)


def test_zeros_for_outputs_of_magnitude_1e_7_are_refused(executor: LocalExecutor) -> None:
    zeros = compared(executor, "tiny.cu", "scale_tiny", "scale_tiny_zeros").candidate
    assert zeros.status == Status.MISMATCH, zeros.message
    # even where the spec's absolute tolerance would swallow the signal
    loose = compared(executor, "tiny.cu", "scale_tiny_loose", "scale_tiny_zeros").candidate
    assert loose.status == Status.MISMATCH and "no signal" in loose.message, loose.message
    honest = compared(executor, "tiny.cu", "scale_tiny", "scale_tiny_div").candidate  # off by an ulp
    timed(honest)


def test_bf16_outputs_verified(executor: LocalExecutor) -> None:
    packed = compared(executor, "types_const.cu", "residual_bf16", "residual_bf16x2").candidate
    timed(packed)
    assert packed.precision == ""  # the baseline computes in bf16 too: not a lower precision
    wrong = compared(executor, "types_const.cu", "residual_bf16", "residual_bf16_wrong").candidate
    assert wrong.status == Status.MISMATCH, wrong.message


def test_integer_counts_in_an_accumulating_inout_array_verified_and_timed(executor: LocalExecutor) -> None:
    """The bins accumulate: unless restored before every timed launch, the outputs the timed runs
    leave (checked against the baseline's after timing) would be multiples of the counts."""
    shared = compared(executor, "types_const.cu", "histogram", "histogram_shared").candidate
    timed(shared)
    racy = compared(executor, "types_const.cu", "histogram", "histogram_racy").candidate
    assert racy.status in (Status.MISMATCH, Status.REJECTED), racy.message


def test_accumulating_fp32_inout_timed_against_itself(executor: LocalExecutor) -> None:
    (c,) = against_itself(executor, "saxpy_precision.cu", "saxpy").candidates
    timed(c)
    assert 0.5 < c.speedup < 2.0


def test_constant_array_verified_and_timed(executor: LocalExecutor) -> None:
    """A `const` line fills a `__constant__` array (2-D launch for the original, 1-D for the rewrite)."""
    horner = compared(executor, "types_const.cu", "poly2d", "poly2d_horner").candidate
    timed(horner)
    # the coefficients are the spec's random data, not zeros: the two forms round differently
    assert max(ch.max_abs_err for ch in horner.checks) > 0


def test_uint8_image_on_a_3d_grid_timed_against_itself(executor: LocalExecutor) -> None:
    (c,) = against_itself(executor, "box_filter.cu", "box_filter").candidates
    timed(c)
    assert c.achieved_gbps > 0


def test_a_descheduled_host_thread_does_not_stretch_a_sample() -> None:
    """The second mode of the samples inside optimize runs: a host thread away (descheduled while
    the next candidates compile) between a sample's start event and its launch is timed too,
    unless the round is enqueued behind the gate.  Here the host sleeps 20 ms before each launch
    of a ~0.05 ms kernel."""
    import time

    import numpy as np

    from sandbox.compiler import compile_cuda
    from sandbox.contract import Budget, Launch
    from sandbox.gpu_handler import HELPERS
    from sandbox.runtime import make_runtime
    from sandbox.timing import Flusher, Gate, bench

    rt = make_runtime("cupy")
    info = rt.device_info()
    helpers = compile_cuda(
        HELPERS, filename="helpers.cu", arch="sm_" + info.compute_capability.replace(".", "")
    )
    assert helpers.result.ok, helpers.result.log
    spin = rt.load(helpers.binary, "cuda_agent_spin")

    def late(slot: int) -> None:
        time.sleep(0.02)
        rt.launch(spin, Launch((1, 1, 1), (1, 1, 1)), (np.int64(100_000),))

    budget = Budget(min_samples=8, max_samples=8, time_budget_ms=60_000)
    flusher = Flusher(rt, 2 * max(info.l2_bytes, 1 << 20))
    (exposed,) = bench(rt, [late], 1, flusher, budget).timings
    (gated,) = bench(
        rt, [late], 1, flusher, budget, gate=Gate(rt, rt.load(helpers.binary, "cuda_agent_gate"))
    ).timings
    assert exposed.median_ms > 10  # the host's absence, measured as kernel time
    assert gated.median_ms < 2 and gated.samples == exposed.samples == 9
