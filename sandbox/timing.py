"""Timing: interleaved, L2-cold, adaptive — in the manner of triton's ``do_bench`` and nvbench.

- :func:`summarize` turns samples into a :class:`~sandbox.contract.Timing` (median, quartiles,
  relative spread ``(q3 - q1) / median``).
- :func:`bench` times one kernel, or a baseline and a candidate interleaved (A B B A, so neither
  always runs first), on rotated input slots: before every sample an L2-sized buffer is
  overwritten (flushing L2), then CUDA events bracket the launch on the legacy default stream.
  Samples are taken in rounds without host synchronisation inside a round; sampling stops when
  both relative spreads fall below the target (after ``min_samples``), at ``max_samples``, or
  when the wall-clock budget is spent.
- Throttling: a spin kernel that runs a fixed number of SM clock cycles is timed before and
  after sampling; a drop in the derived clock rate beyond 5% sets ``throttled``.
- Device ceilings (device-to-device copy bandwidth, FP32 GEMM rate) are measured once per device
  and driver and cached in ``$XDG_CACHE_HOME/cuda-agent/ceilings.json``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from sandbox.contract import Budget, CandidateResult, DeviceInfo, Problem, Timing
from sandbox.runtime import Runtime

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
    )


def speedups(baseline: Timing, candidate: Timing) -> tuple[float, float, float]:
    """(median ratio, pessimistic q1/q3, optimistic q3/q1) of baseline time over candidate time."""
    return (
        baseline.median_ms / candidate.median_ms,
        baseline.q1_ms / candidate.q3_ms,
        baseline.q3_ms / candidate.q1_ms,
    )


def done_sampling(series: Sequence[Sequence[float]], budget: Budget, elapsed_ms: float) -> bool:
    n = min(len(s) for s in series)
    if n >= budget.max_samples or (n >= budget.min_samples and elapsed_ms >= budget.time_budget_ms):
        return True
    return n >= budget.min_samples and all(
        summarize(s).rel_spread <= budget.target_rel_spread for s in series
    )


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


def bench(
    rt: Runtime,
    kernels: Sequence[Enqueue],
    slots: int,
    flusher: Flusher,
    budget: Budget,
    clock_mhz: Callable[[], float] | None = None,
) -> list[Timing]:
    """Time each of ``kernels`` (one or two), interleaved, on ``slots`` rotated input slots."""
    for enqueue in kernels:  # warm-up: module load, instruction cache, clocks
        enqueue(0)
    rt.synchronize()
    before = clock_mhz() if clock_mhz else 0.0
    series: list[list[float]] = [[] for _ in kernels]
    events = [[(rt.event(), rt.event()) for _ in range(ROUND)] for _ in kernels]
    order = list(range(len(kernels)))
    slot = 0
    start = time.perf_counter()
    while not done_sampling(series, budget, (time.perf_counter() - start) * 1e3):
        for i in range(ROUND):
            for k in order:
                flusher.flush()
                ev_start, ev_end = events[k][i]
                rt.record(ev_start)
                kernels[k](slot)
                rt.record(ev_end)
            order.reverse()
            slot = (slot + 1) % slots
        rt.synchronize()
        for k in range(len(kernels)):
            series[k].extend(rt.elapsed_ms(s, e) for s, e in events[k])
    after = clock_mhz() if clock_mhz else 0.0
    throttled = bool(before and after < (1 - THROTTLE_DROP) * before)
    if throttled:
        log.warning("SM clock dropped from %.0f to %.0f MHz while sampling", before, after)
    return [summarize(s[: budget.max_samples], throttled) for s in series]


# --------------------------------------------------------------------------- device ceilings

COPY_BYTES = 1 << 30
GEMM_N = 8192


def measure_ceilings(rt: Runtime) -> tuple[float, float]:
    """(device-to-device copy GB/s counting read + write, FP32 GEMM GFLOP/s)."""
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
    return bandwidth, rt.gemm_gflops(GEMM_N)


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
            info, peak_bandwidth_gbps=float(entry["bandwidth_gbps"]), peak_gflops=float(entry["gflops"])
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


def with_throughput(result: CandidateResult, problem: Problem, device: DeviceInfo) -> CandidateResult:
    """``result`` with achieved GB/s and GFLOP/s (from the problem's byte and flop counts at the
    median time) and their share of the device's measured ceilings."""
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
        pct_peak_flops=percent_of_peak(gflops, device.peak_gflops),
    )


def measured_text(result: CandidateResult, detail: bool = False) -> str:
    """What was measured, on one line: median with spread, bandwidth against the device's ceiling;
    with ``detail`` also the FLOP rate and registers/spills (for an LLM's feedback)."""
    parts = []
    if result.timing:
        t = result.timing
        parts.append(f"{t.median_ms:.4g} ms median (spread {t.rel_spread:.1%}, {t.samples} samples)")
    if result.achieved_gbps:
        parts.append(f"{result.achieved_gbps:.0f} GB/s = {result.pct_peak_bandwidth:.0f}% of peak bandwidth")
    if detail and result.achieved_gflops:
        parts.append(f"{result.achieved_gflops:.0f} GFLOP/s = {result.pct_peak_flops:.0f}% of peak compute")
    if detail and result.resources:
        parts.append(f"{result.resources.registers} registers, {result.resources.spill_stores} B spilled")
    return "; ".join(parts) or "not timed"


PLAUSIBLE_PCT = 110.0  # above this share of a measured ceiling, a timing cannot be right


def implausible(result: CandidateResult) -> str:
    """Why a timed candidate's throughput is physically impossible ('' if it is not): faster than
    the device's measured copy bandwidth or GEMM rate for the work its problem must do.  Either the
    timed region missed work, or the spec's ``work bytes=``/``flops=`` overstates the work."""
    for what, pct, achieved, unit in (
        ("bandwidth", result.pct_peak_bandwidth, result.achieved_gbps, "GB/s"),
        ("FLOP rate", result.pct_peak_flops, result.achieved_gflops, "GFLOP/s"),
    ):
        if pct > PLAUSIBLE_PCT:
            return (
                f"measured {achieved:.0f} {unit} = {pct:.0f}% of the device's measured {what} ceiling: "
                "work must have escaped the timed region (or the spec's work count is too high)"
            )
    return ""
