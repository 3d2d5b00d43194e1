"""Timing: paired, L2-cold, adaptive — in the manner of triton's ``do_bench`` and nvbench.

- :func:`summarize` turns samples into a :class:`~sandbox.contract.Timing` (median, quartiles,
  relative spread ``(q3 - q1) / median``, and the modes when :func:`modes` finds two).
- :func:`bench` times one kernel, or a baseline and a candidate in pairs.  Both kernels of a pair
  run on the same buffers (one of ``slots`` rotated input sets), back to back, in alternating order
  (A B, B A), so whatever slows one slot or one moment (page placement, another process's work,
  clocks) slows both; the speedup is the distribution of the per-pair ratios.  A warm-up runs both
  kernels once on every slot, so every buffer has been touched by them before the first sample.  Before every
  sample ``reset(slot)`` restores the slot (outputs poisoned, ``inout`` arrays copied back from
  their pristine copies), an L2-sized buffer is overwritten (flushing L2), then CUDA events
  bracket the launch on the legacy default stream.  Samples are taken in rounds without host
  synchronisation inside a round, each round enqueued behind a :class:`Gate` so that host delays
  cannot enter a sample; a final round runs every slot's pair with the candidate last, so the
  outputs it leaves can be checked.
- Sampling stops at ``max_samples``, when the wall-clock budget is spent (after ``min_samples``),
  or, after ``min_samples``: one kernel alone, when its relative spread is below the target; a
  pair, when the pessimistic bound (first quartile of the paired ratios) is decided: its 95%
  confidence interval lies on one side of 1, or is narrower than the target spread.
- Throttling: a spin kernel that runs a fixed number of SM clock cycles is timed before and
  after sampling; a drop in the derived clock rate beyond 5% sets ``throttled``.
- Device ceilings (device-to-device copy bandwidth, FP32 GEMM rate, fp16 tensor-core GEMM rate)
  are measured once per device and driver and cached in ``$XDG_CACHE_HOME/cuda-agent/ceilings.json``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from sandbox.contract import Budget, CandidateResult, DeviceInfo, Launch, Problem, Status, Timing
from sandbox.runtime import KernelHandle, Runtime

log = logging.getLogger(__name__)

THROTTLE_DROP = 0.05
ROUND = 8  # samples per kernel per round (one host synchronisation per round)

Enqueue = Callable[[int], None]  # enqueue one launch on input slot i (asynchronous)


def summarize(samples_ms: Sequence[float], throttled: bool = False) -> Timing:
    if not samples_ms:
        raise ValueError("no samples")
    a = np.asarray(samples_ms, dtype=np.float64)
    q1, med, q3 = (float(x) for x in np.percentile(a, [25, 50, 75]))
    return Timing(
        median_ms=med,
        q1_ms=q1,
        q3_ms=q3,
        min_ms=float(a.min()),
        samples=int(a.size),
        rel_spread=(q3 - q1) / med if med > 0 else 0.0,
        throttled=throttled,
        modes=modes(a),
    )


MODE_SHARE = 0.1  # each mode holds at least this share of the samples
MODE_GAP = 0.05  # and they are at least this far apart (relative)


def modes(samples: Sequence[float] | np.ndarray) -> tuple[float, ...]:
    """The medians of two modes when ``samples`` fall into two groups, else ().

    Two modes: sorted, the widest gap between neighbours that leaves at least ``MODE_SHARE`` of the
    samples on each side is over ``MODE_GAP`` (relative) and over half the range of the central 90%."""
    x = np.sort(np.log(np.asarray(samples, dtype=np.float64)))
    n = x.size
    lo, hi = math.ceil(n * MODE_SHARE), math.floor(n * (1 - MODE_SHARE))
    if n < 20 or hi <= lo:
        return ()
    gaps = x[lo:hi] - x[lo - 1 : hi - 1]  # gap before sample i, for i in [lo, hi)
    j = int(np.argmax(gaps))
    central = x[math.floor(0.95 * (n - 1))] - x[math.ceil(0.05 * (n - 1))]
    if gaps[j] <= math.log1p(MODE_GAP) or gaps[j] <= 0.5 * central:
        return ()
    split = lo + j
    return (float(np.exp(np.median(x[:split]))), float(np.exp(np.median(x[split:]))))


def speedups(baseline: Timing, candidate: Timing) -> tuple[float, float, float]:
    """Unpaired (median ratio, q1/q3, q3/q1) of baseline time over candidate time, for timings
    taken apart (the scripted executor); the sandbox reports paired ratios (:func:`paired`)."""
    return (
        baseline.median_ms / candidate.median_ms,
        baseline.q1_ms / candidate.q3_ms,
        baseline.q3_ms / candidate.q1_ms,
    )


def paired(ratios: Sequence[float]) -> tuple[float, float, float]:
    """(median, first quartile, third quartile) of per-pair ratios baseline time / candidate time."""
    q1, med, q3 = (float(x) for x in np.percentile(np.asarray(ratios, dtype=np.float64), [25, 50, 75]))
    return med, q1, q3


def quartile_interval(ratios: Sequence[float], z: float = 1.96) -> tuple[float, float]:
    """A distribution-free ~95% confidence interval of the first quartile (order statistics)."""
    r = np.sort(np.asarray(ratios, dtype=np.float64))
    n = r.size
    half = z * math.sqrt(n * 0.25 * 0.75)
    return float(r[max(0, math.floor(0.25 * n - half))]), float(r[min(n - 1, math.ceil(0.25 * n + half))])


def done_sampling(
    series: Sequence[Sequence[float]], ratios: Sequence[float], budget: Budget, elapsed_ms: float
) -> bool:
    n = min(len(s) for s in series)
    if n >= budget.max_samples or (n >= budget.min_samples and elapsed_ms >= budget.time_budget_ms):
        return True
    if n < budget.min_samples:
        return False
    if len(series) == 1:
        return summarize(series[0]).rel_spread <= budget.target_rel_spread
    lo, hi = quartile_interval(ratios)
    return lo > 1.0 or hi < 1.0 or hi - lo <= budget.target_rel_spread * float(np.median(ratios))


@dataclass
class Flusher:
    """Overwrites a buffer of twice the L2 size before each sample, evicting everything cached."""

    rt: Runtime
    nbytes: int
    ptr: int = 0
    _byte: int = 0

    def __post_init__(self) -> None:
        self.ptr = self.rt.alloc(self.nbytes)

    def flush(self) -> None:
        self._byte = (self._byte + 1) & 0xFF
        self.rt.memset_async(self.ptr, self._byte, self.nbytes)

    def close(self) -> None:
        self.rt.free(self.ptr)


GATE_CYCLES = 2_000_000_000  # a closed gate opens by itself after this many SM cycles (about 1 s)


@dataclass
class Gate:
    """Holds the GPU while a round of samples is enqueued (as nvbench's blocking kernel does): a
    one-thread kernel spins until the host sets a flag in page-locked memory, so every launch of
    the round is queued behind it before the first one runs.  Without it, a host thread that is
    descheduled (other processes compiling the next candidates, say) between recording a sample's
    start event and launching its kernel stretches that sample by the time it was away: a second
    mode a scheduler time slice above the first.  ``kernel`` is ``cuda_agent_gate``."""

    rt: Runtime
    kernel: KernelHandle
    flag: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.flag = self.rt.pinned(4).view(np.int32)

    def close(self) -> None:
        """Enqueue the spinning kernel (the previous one has finished: rounds end synchronized)."""
        self.flag[0] = 0
        args = (self.flag.ctypes.data, np.int64(GATE_CYCLES))
        self.rt.launch(self.kernel, Launch((1, 1, 1), (1, 1, 1)), args)

    def open(self) -> None:
        self.flag[0] = 1


@dataclass(frozen=True)
class Sampled:
    timings: list[Timing]  # one per kernel
    ratios: list[float]  # per pair: baseline time / candidate time (empty for one kernel)


def bench(
    rt: Runtime,
    kernels: Sequence[Enqueue],
    slots: int,
    flusher: Flusher,
    budget: Budget,
    clock_mhz: Callable[[], float] | None = None,
    reset: Enqueue | None = None,
    gate: Gate | None = None,
    settle: Callable[[], None] | None = None,
) -> Sampled:
    """Time ``kernels`` (one, or baseline and candidate in pairs) on ``slots`` rotated input sets
    that both kernels share; ``reset(slot)`` enqueues what restores a slot before each sample;
    each round of samples is enqueued behind ``gate`` when given.  ``settle`` (a device-wide
    synchronize: code whose work may run on any stream) is called after each timed call and
    before its end event is recorded, so a sample ends only when the device has finished
    everything the call started, on every stream; it cannot be combined with a gate (the round
    is no longer enqueued ahead of the device)."""
    if settle is not None and gate is not None:
        raise ValueError("a settled sample waits for the device: no gate can hold a round")

    def sample(k: int, slot: int, events: tuple[Any, Any]) -> None:
        if reset is not None:
            reset(slot)
        flusher.flush()
        if settle is not None:  # nothing of the previous sample (or the reset) runs into this one
            settle()
        rt.record(events[0])
        kernels[k](slot)
        if settle is not None:
            settle()
        rt.record(events[1])

    for slot in range(slots):  # warm-up: module load, instruction cache, clocks; every buffer touched
        for k in range(len(kernels)):
            if reset is not None:
                reset(slot)
            kernels[k](slot)
    rt.synchronize()
    before = clock_mhz() if clock_mhz else 0.0
    series: list[list[float]] = [[] for _ in kernels]
    ratios: list[float] = []
    rounds = max(ROUND, slots)
    events = [[(rt.event(), rt.event()) for _ in range(rounds)] for _ in kernels]
    order = list(range(len(kernels)))
    slot = 0
    start = time.perf_counter()
    closing = False
    while not closing:
        closing = done_sampling(series, ratios, budget, (time.perf_counter() - start) * 1e3)
        # the closing round: every slot once, the candidate last, so its outputs can be checked
        plan = [(s, sorted(order)) for s in range(slots)] if closing else []
        if not closing:
            for _ in range(ROUND):
                plan.append((slot, list(order)))
                order.reverse()
                slot = (slot + 1) % slots
        if gate is not None:
            gate.close()
        try:
            for i, (s, ks) in enumerate(plan):
                for k in ks:
                    sample(k, s, events[k][i])
        finally:
            if gate is not None:
                gate.open()
        rt.synchronize()
        got = [[rt.elapsed_ms(*events[k][i]) for i in range(len(plan))] for k in range(len(kernels))]
        for k, times in enumerate(got):
            series[k].extend(times)
        if len(kernels) == 2:
            ratios.extend(a / b if b > 0 else 0.0 for a, b in zip(got[0], got[1], strict=True))
    after = clock_mhz() if clock_mhz else 0.0
    throttled = bool(before and after < (1 - THROTTLE_DROP) * before)
    if throttled:
        log.warning("SM clock dropped from %.0f to %.0f MHz while sampling", before, after)
    return Sampled([summarize(s, throttled) for s in series], ratios)


# --------------------------------------------------------------------------- device ceilings

COPY_BYTES = 1 << 30
GEMM_N = 8192


def measure_ceilings(rt: Runtime) -> tuple[float, float, float]:
    """(device-to-device copy GB/s counting read + write, FP32 GEMM GFLOP/s, fp16 tensor-core
    GEMM GFLOP/s)."""
    size = COPY_BYTES
    with rt.buffer(size) as src, rt.buffer(size) as dst:
        rt.copy_async(dst, src, size)
        start, end = rt.event(), rt.event()
        times = []
        for _ in range(10):
            rt.record(start)
            rt.copy_async(dst, src, size)
            rt.record(end)
            rt.synchronize()
            times.append(rt.elapsed_ms(start, end))
    bandwidth = 2 * size / (float(np.median(times)) * 1e-3) / 1e9
    return bandwidth, rt.gemm_gflops(GEMM_N), rt.gemm_gflops(GEMM_N, "float16")


def cache_path() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "cuda-agent" / "ceilings.json"


def _key(info: DeviceInfo) -> str:
    return f"{info.name} | driver {info.driver}"


def cached_ceilings(info: DeviceInfo, path: Path | None = None) -> DeviceInfo | None:
    """``info`` with the ceilings measured earlier on this device and driver, or None."""
    try:
        data = json.loads((path or cache_path()).read_text())
        entry = data[_key(info)]
        return replace(
            info,
            peak_bandwidth_gbps=float(entry["bandwidth_gbps"]),
            peak_gflops=float(entry["gflops"]),
            peak_tensor_gflops=float(entry["tensor_gflops"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store_ceilings(info: DeviceInfo, path: Path | None = None) -> None:
    path = path or cache_path()
    try:
        data = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        data = {}
    data[_key(info)] = {
        "bandwidth_gbps": info.peak_bandwidth_gbps,
        "gflops": info.peak_gflops,
        "tensor_gflops": info.peak_tensor_gflops,
        "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(path)
    except OSError as exc:
        log.warning("cannot cache device ceilings in %s: %s", path, exc)


def percent_of_peak(value: float, peak: float) -> float:
    return 100.0 * value / peak if peak > 0 else 0.0


TENSOR_KINDS = ("tf32", "fp16", "bf16", "mma")  # precisions whose FLOP ceiling is the tensor cores'


def flop_ceiling(result: CandidateResult, device: DeviceInfo) -> float:
    """The FLOP rate a result is held to: the FP32 GEMM rate, or the tensor-core rate for a
    candidate that computes in a lower precision on tensor cores."""
    lower = any(k in result.precision for k in TENSOR_KINDS)
    return max(device.peak_tensor_gflops, device.peak_gflops) if lower else device.peak_gflops


def with_throughput(result: CandidateResult, problem: Problem, device: DeviceInfo) -> CandidateResult:
    """``result`` with achieved GB/s and GFLOP/s (from the problem's byte and flop counts at the
    median time) and their share of the device's measured ceilings (:func:`flop_ceiling`)."""
    if result.timing is None or result.timing.median_ms <= 0:
        return result
    seconds = result.timing.median_ms * 1e-3
    gbps = problem.bytes_moved / seconds / 1e9
    gflops = problem.flops / seconds / 1e9
    return replace(
        result,
        achieved_gbps=gbps,
        achieved_gflops=gflops,
        pct_peak_bandwidth=percent_of_peak(gbps, device.peak_bandwidth_gbps),
        pct_peak_flops=percent_of_peak(gflops, flop_ceiling(result, device)),
    )


def spread_text(rel_spread: float) -> str:
    """A timing's spread as every view shows it (CLI, editor, LLM feedback): half the interquartile
    range over the median."""
    return f"IQR ±{rel_spread * 50:.1f}%"


def measured_text(result: CandidateResult, detail: bool = False) -> str:
    """What was measured, on one line: median with spread, bandwidth against the device's ceiling,
    and what the timing needs said with it (``note``: bimodal samples, throttling); with ``detail``
    also the FLOP rate and registers/spills (for an LLM's feedback)."""
    parts = []
    if result.timing:
        t = result.timing
        parts.append(f"{t.median_ms:.4g} ms median ({spread_text(t.rel_spread)}, {t.samples} samples)")
    if result.achieved_gbps:
        parts.append(f"{result.achieved_gbps:.0f} GB/s = {result.pct_peak_bandwidth:.0f}% of peak bandwidth")
    if detail and result.achieved_gflops:
        parts.append(f"{result.achieved_gflops:.0f} GFLOP/s = {result.pct_peak_flops:.0f}% of peak compute")
    if detail and result.resources:
        parts.append(f"{result.resources.registers} registers, {result.resources.spill_stores} B spilled")
    if result.note:  # multimodal samples, throttling: the median alone would hide them
        parts.append(result.note)
    return "; ".join(parts) or "not timed"


PLAUSIBLE_PCT = 110.0  # above this share of a measured ceiling, a timing cannot be right


def implausible(result: CandidateResult, problem: Problem | None = None) -> str:
    """Why a timed candidate's throughput is physically impossible ('' if it is not): faster than
    the device's measured copy bandwidth or GEMM rate (:func:`flop_ceiling`: FP32, or tensor cores
    for a lower-precision candidate) for the work its problem must do, by more than the margin
    ``PLAUSIBLE_PCT``.  Either the timed region missed work, or the spec's ``work bytes=``/
    ``flops=`` overstates the work (then the spec says ``work ... floor=off`` and ``problem``'s
    ``work_floor`` turns the check off)."""
    if problem is not None and not problem.work_floor:
        return ""
    median = result.timing.median_ms if result.timing else 0.0
    for what, pct, achieved, unit in (
        ("copy bandwidth", result.pct_peak_bandwidth, result.achieved_gbps, "GB/s"),
        ("FLOP rate", result.pct_peak_flops, result.achieved_gflops, "GFLOP/s"),
    ):
        if pct > PLAUSIBLE_PCT:
            return (
                f"implausible: {median:.4g} ms means {achieved:.0f} {unit} = {pct:.0f}% of the device's "
                f"measured {what} of {achieved * 100 / pct:.0f} {unit} (the limit is {PLAUSIBLE_PCT:.0f}%) "
                "for the problem's work: work "
                "must have escaped the timed region (or the work counted is too high: a spec's "
                "`work ... floor=off`)"
            )
    return ""


def physics_floor(result: CandidateResult, problem: Problem) -> CandidateResult:
    """A timed ``ok`` candidate refused as ``implausible`` when :func:`implausible` says why."""
    if result.status is Status.OK and (why := implausible(result, problem)):
        return replace(result, status=Status.IMPLAUSIBLE, message=why)
    return result
