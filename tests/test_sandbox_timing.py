"""Statistics, paired adaptive sampling (on a scripted runtime), modes, throughput, ceilings cache."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from sandbox_fakes import vadd_problem

from sandbox.contract import Budget, CandidateResult, DeviceInfo, Status, Timing
from sandbox.gpu_handler import timing_note
from sandbox.timing import (
    Flusher,
    bench,
    cached_ceilings,
    done_sampling,
    measured_text,
    modes,
    paired,
    quartile_interval,
    speedups,
    store_ceilings,
    summarize,
    with_throughput,
)


def test_summarize_quartiles() -> None:
    t = summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (t.median_ms, t.q1_ms, t.q3_ms, t.min_ms, t.samples) == (3.0, 2.0, 4.0, 1.0, 5)
    assert t.rel_spread == pytest.approx(2.0 / 3.0)
    with pytest.raises(ValueError):
        summarize([])


def test_speedups_are_bracketed() -> None:
    base = Timing(2.0, 1.9, 2.1, 1.8, 10, 0.1)
    cand = Timing(1.0, 0.95, 1.05, 0.9, 10, 0.1)
    speed, low, high = speedups(base, cand)
    assert speed == 2.0 and low < speed < high
    assert low == pytest.approx(1.9 / 1.05) and high == pytest.approx(2.1 / 0.95)


class ScriptedRuntime:
    """Stands in for a Runtime: events carry the time a scripted sequence gives each launch."""

    def __init__(self, durations: dict[int, list[float]]) -> None:
        self.durations = {k: itertools.cycle(v) for k, v in durations.items()}
        self.log: list[str] = []
        self.clock = 0.0

    def alloc(self, nbytes: int) -> int:
        return 4096

    def free(self, ptr: int) -> None:
        pass

    def memset_async(self, ptr: int, byte: int, nbytes: int) -> None:
        self.log.append("flush")

    def event(self) -> list[float]:
        return [0.0]

    def record(self, event: list[float]) -> None:
        event[0] = self.clock

    def elapsed_ms(self, start: list[float], end: list[float]) -> float:
        return end[0] - start[0]

    def synchronize(self) -> None:
        pass

    def enqueue(self, k: int) -> object:
        def run(slot: int) -> None:
            self.log.append(f"{'AB'[k]}{slot}")
            self.clock += next(self.durations[k])

        return run


def test_bench_pairs_on_shared_slots_resets_and_ends_with_the_candidate() -> None:
    rt = ScriptedRuntime({0: [2.0], 1: [1.0]})
    resets: list[int] = []

    def reset(slot: int) -> None:
        resets.append(slot)
        rt.log.append(f"reset{slot}")

    budget = Budget(min_samples=10, max_samples=200, target_rel_spread=0.01, time_budget_ms=10_000)
    out = bench(rt, [rt.enqueue(0), rt.enqueue(1)], 3, Flusher(rt, 1 << 20), budget, reset=reset)  # type: ignore[arg-type]
    a, b = out.timings
    assert a.median_ms == 2.0 and b.median_ms == 1.0 and not a.modes
    # two rounds of 8 pairs reach min_samples with a decided bound, then the closing round (3 slots)
    assert a.samples == b.samples == len(out.ratios) == 19 and set(out.ratios) == {2.0}
    warm = rt.log[:12]  # warm-up: both kernels on every slot (each launch after its slot's reset)
    assert [e for e in warm if e[0] in "AB"] == ["A0", "B0", "A1", "B1", "A2", "B2"]
    timed = [e for e in rt.log[12:] if e[0] in "AB"]
    assert timed[:8] == ["A0", "B0", "B1", "A1", "A2", "B2", "B0", "A0"]  # both kernels on the same slot
    assert timed[-6:] == ["A0", "B0", "A1", "B1", "A2", "B2"]  # the candidate last on every slot
    samples = rt.log[12:]
    for i, e in enumerate(samples):  # every timed launch: its slot restored, then L2 flushed, just before
        if e[0] in "AB":
            assert samples[i - 1] == "flush" and samples[i - 2] == f"reset{e[1]}"


class ScriptedGate:
    """Stands in for :class:`sandbox.timing.Gate`: notes in the runtime's log when it closes and opens."""

    def __init__(self, rt: ScriptedRuntime) -> None:
        self.rt = rt

    def close(self) -> None:
        self.rt.log.append("close")

    def open(self) -> None:
        self.rt.log.append("open")


def test_every_round_is_enqueued_behind_the_gate() -> None:
    """The GPU starts a round only once all of it is queued: a host thread descheduled between a
    sample's start event and its launch cannot stretch the sample."""
    rt = ScriptedRuntime({0: [2.0], 1: [1.0]})
    budget = Budget(min_samples=10, max_samples=200, target_rel_spread=0.01, time_budget_ms=10_000)
    gate = ScriptedGate(rt)
    bench(rt, [rt.enqueue(0), rt.enqueue(1)], 2, Flusher(rt, 1 << 20), budget, gate=gate)  # type: ignore[arg-type]
    timed = rt.log[4:]  # after the warm-up (both kernels on both slots), which is not gated
    assert "close" not in rt.log[:4] and timed[0] == "close" and timed[-1] == "open"
    rounds = " ".join(timed).split("open")[:-1]
    assert len(rounds) == 3  # two rounds of 8 pairs, then the closing round over both slots
    for r in rounds:  # each round: closed first, every sample of the round, then opened
        launches = [e for e in r.split() if e[0] in "AB"]
        assert r.split()[0] == "close" and r.split().count("close") == 1 and launches
    assert [len([e for e in r.split() if e[0] in "AB"]) for r in rounds] == [16, 16, 4]


def test_a_settled_sample_ends_after_the_work_the_call_left_running() -> None:
    """Work a call leaves running (another stream, a graph it replays) is outside an event pair on
    the caller's stream; with ``settle`` (a device-wide synchronize before the end event) it is in."""
    rt = ScriptedRuntime({0: [2.0], 1: [1.0]})
    pending = [0.0]

    def escaping(slot: int) -> None:  # 1 ms on the caller's stream, 3 ms left running elsewhere
        rt.log.append(f"B{slot}")
        rt.clock += 1.0
        pending[0] += 3.0

    def settle() -> None:
        rt.clock += pending[0]
        pending[0] = 0.0

    budget = Budget(min_samples=10, max_samples=40, target_rel_spread=0.01, time_budget_ms=10_000)
    fooled = bench(rt, [rt.enqueue(0), escaping], 1, Flusher(rt, 1024), budget)  # type: ignore[arg-type]
    assert fooled.timings[1].median_ms == 1.0 and set(fooled.ratios) == {2.0}
    settled = bench(rt, [rt.enqueue(0), escaping], 1, Flusher(rt, 1024), budget, settle=settle)  # type: ignore[arg-type]
    assert settled.timings[1].median_ms == 4.0 and set(settled.ratios) == {0.5}
    with pytest.raises(ValueError):
        bench(rt, [rt.enqueue(0)], 1, Flusher(rt, 1024), budget, gate=ScriptedGate(rt), settle=settle)  # type: ignore[arg-type]


def test_bench_keeps_sampling_while_noisy_up_to_max() -> None:
    rt = ScriptedRuntime({0: [1.0, 1.5, 0.7, 1.2]})
    budget = Budget(min_samples=10, max_samples=40, target_rel_spread=0.01, time_budget_ms=10_000)
    (t,) = bench(rt, [rt.enqueue(0)], 2, Flusher(rt, 1024), budget).timings  # type: ignore[arg-type]
    assert t.samples == 42 and t.rel_spread > 0.01  # 40, then the closing round over 2 slots


def test_paired_sampling_continues_while_the_pessimistic_bound_is_undecided() -> None:
    budget = Budget(min_samples=10, max_samples=400, target_rel_spread=0.01, time_budget_ms=10_000)
    rng = np.random.default_rng(0)
    noisy = list(1.0 + 0.05 * rng.standard_normal(40))  # q1 near 0.97: is it below 1? yes, decided
    assert done_sampling([noisy, noisy], noisy, budget, 0.0)
    straddling = list(1.035 + 0.05 * rng.standard_normal(40))  # q1 near 1.0: undecided
    lo, hi = quartile_interval(straddling)
    assert lo < 1.0 < hi and hi - lo > 0.01
    assert not done_sampling([straddling, straddling], straddling, budget, 0.0)
    assert done_sampling([straddling, straddling], straddling, budget, 20_000.0)  # the budget ends it
    assert paired([1.0, 2.0, 3.0, 4.0, 5.0]) == (3.0, 2.0, 4.0)


def test_two_modes_are_detected_and_named() -> None:
    rng = np.random.default_rng(1)
    fast = 1.02 * (1 + 0.01 * rng.standard_normal(60))
    slow = 5.95 * (1 + 0.01 * rng.standard_normal(40))
    found = modes(np.concatenate([fast, slow]))
    assert (
        len(found) == 2
        and found[0] == pytest.approx(1.02, rel=0.01)
        and found[1] == pytest.approx(5.95, rel=0.01)
    )
    assert summarize(list(np.concatenate([fast, slow]))).modes == found
    assert modes(fast) == ()  # one mode, 1% noise
    assert modes(np.concatenate([fast, [9.0, 9.1]])) == ()  # two outliers are not a mode
    # said in the result and wherever its timing is shown, not hidden in a median of the two modes
    two = summarize(list(np.concatenate([fast, slow])))
    note = timing_note([two, summarize(list(fast))], list(np.concatenate([fast, slow]) / 1.02))
    assert note.startswith("baseline samples are bimodal (1.02 ms and 5.95")
    assert "paired ratios are bimodal" in note and "candidate" not in note
    shown = measured_text(CandidateResult("c", Status.OK, timing=two, note=note))
    assert shown.startswith(f"{two.median_ms:.4g} ms median") and "bimodal (1.02 ms and 5.95" in shown


def test_bench_flags_throttling() -> None:
    rt = ScriptedRuntime({0: [1.0]})
    clocks = iter([1980.0, 1500.0])
    (t,) = bench(rt, [rt.enqueue(0)], 1, Flusher(rt, 1024), Budget(), lambda: next(clocks)).timings  # type: ignore[arg-type]
    assert t.throttled
    steady = iter([1980.0, 1975.0])
    (t,) = bench(rt, [rt.enqueue(0)], 1, Flusher(rt, 1024), Budget(), lambda: next(steady)).timings  # type: ignore[arg-type]
    assert not t.throttled


DEVICE = DeviceInfo("H200", "9.0", 132, 50 << 20, 141 << 30, driver="13.0")


def test_throughput_from_problem_counts() -> None:
    device = DeviceInfo(**{**DEVICE.__dict__, "peak_bandwidth_gbps": 4000.0, "peak_gflops": 50_000.0})
    timing = Timing(0.1, 0.09, 0.11, 0.08, 10, 0.2)
    result = with_throughput(CandidateResult("c", Status.OK, timing=timing), vadd_problem(1 << 24), device)
    assert result.achieved_gbps == pytest.approx(12 * (1 << 24) / 1e-4 / 1e9)
    assert result.pct_peak_bandwidth == pytest.approx(100 * result.achieved_gbps / 4000.0)
    untimed = CandidateResult("c", Status.MISMATCH)
    assert with_throughput(untimed, vadd_problem(8), device) is untimed


def test_ceilings_cache_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "ceilings.json"
    assert cached_ceilings(DEVICE, path) is None
    measured = DeviceInfo(
        **{
            **DEVICE.__dict__,
            "peak_bandwidth_gbps": 4300.0,
            "peak_gflops": 51_000.0,
            "peak_tensor_gflops": 7e5,
        }
    )
    store_ceilings(measured, path)
    assert cached_ceilings(DEVICE, path) == measured
    other_driver = DeviceInfo(**{**DEVICE.__dict__, "driver": "12.8"})
    assert cached_ceilings(other_driver, path) is None


def test_throughput_beyond_the_measured_ceiling_is_implausible() -> None:
    from sandbox.contract import ArgSpec, CandidateResult, DeviceInfo, Launch, Problem, Status, Timing
    from sandbox.timing import implausible, with_throughput

    device = DeviceInfo(
        "H200", "9.0", 132, 60 << 20, 141 << 30, peak_bandwidth_gbps=4200.0, peak_gflops=51000.0
    )
    n = 1 << 26
    problem = Problem(
        "n=2^26",
        {"n": n},
        (ArgSpec("x", "in", "float32", n), ArgSpec("y", "out", "float32", n)),
        Launch((n // 256, 1, 1), (256, 1, 1)),
        bytes_moved=8 * n,
    )

    def timed(ms: float) -> CandidateResult:
        t = Timing(median_ms=ms, q1_ms=ms, q3_ms=ms, min_ms=ms, samples=50, rel_spread=0.0)
        return with_throughput(CandidateResult("c", Status.OK, timing=t), problem, device)

    honest = timed(0.140)  # 537 MB in 0.14 ms: 3835 GB/s, 91% of the copy ceiling
    assert 90 < honest.pct_peak_bandwidth < 92 and implausible(honest) == ""
    skipped_work = timed(0.070)  # twice as fast as the memory allows: half the work escaped the timer
    assert "escaped the timed region" in implausible(skipped_work)


def test_physics_floor_refuses_impossible_times_with_the_numbers_unless_the_spec_turns_it_off() -> None:
    from dataclasses import replace

    from sandbox.contract import ArgSpec, CandidateResult, DeviceInfo, Launch, Problem, Status, Timing
    from sandbox.timing import PLAUSIBLE_PCT, physics_floor, with_throughput

    device = DeviceInfo(
        "H200", "9.0", 132, 60 << 20, 141 << 30, peak_bandwidth_gbps=4000.0, peak_gflops=50000.0
    )
    n = 100_000_000
    problem = Problem(
        "n=1e8",
        {"n": n},
        (ArgSpec("x", "in", "float32", n), ArgSpec("y", "out", "float32", n)),
        Launch((n // 256, 1, 1), (256, 1, 1)),
        bytes_moved=8 * n,  # 800 MB: 0.2 ms at 4000 GB/s
        flops=2 * n,
    )

    def floor(ms: float, p: Problem = problem) -> CandidateResult:
        t = Timing(median_ms=ms, q1_ms=ms, q3_ms=ms, min_ms=ms, samples=50, rel_spread=0.0)
        return physics_floor(with_throughput(CandidateResult("c", Status.OK, timing=t), p, device), p)

    at_limit = 0.2 / (PLAUSIBLE_PCT / 100) * 1.01  # just inside the margin
    assert floor(at_limit).status is Status.OK and floor(0.25).status is Status.OK
    refused = floor(0.1)  # twice the copy ceiling: work escaped the timed region
    assert refused.status is Status.IMPLAUSIBLE
    assert (
        "0.1 ms" in refused.message
        and "8000 GB/s = 200%" in refused.message
        and "of 4000 GB/s" in refused.message
    )
    assert floor(0.1, replace(problem, work_floor=False)).status is Status.OK  # `work ... floor=off`
    compute = replace(problem, bytes_moved=0, flops=2 * 10**12)  # 2 TFLOP: 40 ms at 50 TFLOP/s
    assert floor(30.0, compute).status is Status.IMPLAUSIBLE and "FLOP rate" in floor(30.0, compute).message
    assert floor(40.0, compute).status is Status.OK
    failed = CandidateResult("c", Status.MISMATCH, "mismatch")  # only timed ok results are judged
    assert physics_floor(failed, problem) is failed


def test_flop_ceiling_follows_the_candidates_precision() -> None:
    from sandbox.contract import ArgSpec, Launch, Problem

    device = DeviceInfo(**{**DEVICE.__dict__, "peak_gflops": 50_000.0, "peak_tensor_gflops": 700_000.0})
    n = 4096
    problem = Problem(
        "n", {"n": n}, (ArgSpec("c", "out", "float32", n * n),), Launch((1, 1, 1), (1, 1, 1)), flops=2 * n**3
    )
    t = Timing(1.0, 1.0, 1.0, 1.0, 10, 0.0)  # 137 TFLOP/s: impossible in FP32, plausible on tensor cores
    fp32 = with_throughput(CandidateResult("c", Status.OK, timing=t), problem, device)
    tensor = with_throughput(
        CandidateResult("c", Status.OK, timing=t, precision="tf32 (wmma)"), problem, device
    )
    assert fp32.pct_peak_flops > 200 and tensor.pct_peak_flops < 25
