"""The result of each run kind, defined once: the stored row, the wire row, the report's body.

One frozen dataclass per result (:class:`BenchmarkRecord`, :class:`OptimizeRecord`,
:class:`CompareRecord`, :class:`ProfileRecord`; each candidate's verdict is
:class:`agent.attempts.AttemptRecord`, a profile's metrics :class:`sandbox.contract.Profile`).
The same object is what ``server.store`` keeps in ``results.json`` (snake_case, through
:func:`sandbox.contract.to_dict`), what the language server sends the editor (camelCase, through
the protocol's converter: ``server.protocol.register_records``) and what the editor's TypeScript
declares (generated from these classes: ``server/protocol_ts.py``).  Closed sets of values are
enums (:class:`~agent.loop.RunOutcome`, :class:`~agent.loop.StopKind`, :class:`CompareRole`,
:class:`sandbox.contract.Status`).

The builders here turn what a run computed (``agent.loop.OptimizeResult``, a timed
``CandidateResult``, an ``agent.compare.Comparison``) into its record; the CLI and the language
server call the same ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum

from agent.attempts import AttemptRecord
from agent.compare import Comparison, headline
from agent.loop import OptimizeResult, RunOutcome, StopKind
from agent.target import Target
from cudasrc.source import Document
from cudasrc.syntax import Kernel
from sandbox.contract import CandidateResult, DeviceInfo, Profile, Status, Tolerance


def record_date() -> str:
    """A record's date: now, to the minute, in UTC."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def kernel_hash(doc: Document, kernel: Kernel) -> str:
    """A short hash of a kernel's definition as written (tells which code a result is about)."""
    return text_hash(doc.data[kernel.span.start_byte : kernel.span.end_byte].decode("utf-8", "replace"))


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True)
class Roofline:
    """What a roofline of a kernel needs beside its times: the device's measured ceilings (copy
    bandwidth, FP32 and tensor-core GEMM rates; 0 when not measured) and the bench problem's
    work from the spec (minimum bytes moved, flops): arithmetic intensity is ``flops / bytes_moved``."""

    peak_gbps: float
    peak_gflops: float
    peak_tensor_gflops: float
    bytes_moved: int
    flops: int


def roofline(target: Target, device: DeviceInfo | None) -> Roofline | None:
    """The device's measured ceilings and the bench problem's work (None without a device)."""
    if device is None:
        return None
    p = target.bench_problem
    return Roofline(
        device.peak_bandwidth_gbps, device.peak_gflops, device.peak_tensor_gflops, p.bytes_moved, p.flops
    )


# ------------------------------------------------------------------------------------- benchmark


@dataclass(frozen=True)
class BenchmarkRecord:
    """A benchmark of a kernel under its spec; ``pct_peak`` is of the device's measured copy bandwidth."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    rel_spread: float
    gbps: float
    pct_peak: float
    problem: str  # the bench problem's label, e.g. "n=16777216"
    device: str
    date: str  # to the minute, UTC
    registers: int = 0
    spill_bytes: int = 0
    gflops: float = 0.0
    roofline: Roofline | None = None
    simulated: bool = False  # timed on the simulated GPU: made-up numbers, not a measurement


def benchmark_record(target: Target, r: CandidateResult, info: DeviceInfo | None) -> BenchmarkRecord:
    """The record of ``target``'s kernel timed as ``r`` (which has a timing) on ``info``."""
    t = r.timing
    assert t is not None
    res = r.resources
    return BenchmarkRecord(
        median_ms=t.median_ms,
        q1_ms=t.q1_ms,
        q3_ms=t.q3_ms,
        rel_spread=t.rel_spread,
        gbps=r.achieved_gbps,
        pct_peak=r.pct_peak_bandwidth,
        problem=target.bench_problem.label,
        device=info.name if info is not None else "",
        date=record_date(),
        registers=res.registers if res else 0,
        spill_bytes=(res.spill_stores + res.spill_loads) if res else 0,
        gflops=r.achieved_gflops,
        roofline=roofline(target, info),
        simulated=info.simulated if info is not None else False,
    )


# ------------------------------------------------------------------------------------- optimize


@dataclass(frozen=True)
class OptimizeRecord:
    """An optimize run of a kernel: its outcome, the verified winner's numbers if any, and every
    candidate's verdict in evaluation order (``history``; ``attempts`` counts them)."""

    run_id: str
    outcome: RunOutcome
    speedup: float
    speedup_low: float
    speedup_high: float
    baseline_ms: float
    baseline_spread: float
    candidate_ms: float
    candidate_spread: float
    sizes: tuple[str, ...]  # problem labels the winner was verified on
    seeds: int
    tolerance: str  # "atol=1e-05 rtol=1e-05", or "calibrated"
    device: str
    date: str
    summary: str  # what the rewrite does, its launch, what it assumes, what is left to do
    attempts: int
    stop_reason: str  # the one line (str(agent.loop.Stop))
    stop_kind: StopKind = StopKind.PROPOSER_EXHAUSTED
    original_hash: str = ""  # kernel_hash of the kernel the run started from
    rewritten_hash: str = ""  # kernel_hash of the verified rewrite
    launch_todo: str = ""  # the launch change the user must still make by hand
    baseline_gbps: float = 0.0
    baseline_gflops: float = 0.0
    roofline: Roofline | None = None
    simulated: bool = False  # run on the simulated GPU: made-up numbers, not a measurement
    history: tuple[AttemptRecord, ...] = ()

    @property
    def improved(self) -> bool:
        return self.outcome is RunOutcome.IMPROVED


def rewrite_summary(result: OptimizeResult) -> str:
    """One line: what the rewrite does, its launch, what it assumes, what the user must still do."""
    if result.best is None:
        return str(result.stop)
    p = result.best.proposal
    parts = [p.description]
    if result.launch is not None:
        launch = result.launch
        parts.append(
            "launch "
            + " ".join(
                f"{k}={v}"
                for k, v in (("grid", launch.grid), ("block", launch.block), ("smem", launch.shared))
                if v
            )
        )
    parts += [f"assumes {a}" for a in p.assumptions]
    if result.launch_todo:
        parts.append(f"⚠ {result.launch_todo}")
    return "; ".join(x for x in parts if x)


def _tolerance(t: Tolerance | None) -> str:
    return t.text() if t is not None else "calibrated"


def optimize_record(
    run_id: str, target: Target, result: OptimizeResult, original_hash: str = "", rewritten_hash: str = ""
) -> OptimizeRecord:
    """The record of an optimize run of ``target`` (the loop's ``result``)."""
    best = result.best.result if result.best is not None else None
    base = result.baseline.timing
    cand = best.timing if best is not None else None
    return OptimizeRecord(
        run_id=run_id,
        outcome=result.outcome,
        speedup=result.speedup,
        speedup_low=result.speedup_low,
        speedup_high=result.speedup_high,
        baseline_ms=base.median_ms if base else 0.0,
        baseline_spread=base.rel_spread if base else 0.0,
        candidate_ms=cand.median_ms if cand else 0.0,
        candidate_spread=cand.rel_spread if cand else 0.0,
        sizes=tuple(c.label for c in result.verification),
        seeds=len({c.seed for c in best.checks}) if best is not None else 0,
        tolerance=_tolerance(target.tolerance),
        device=result.device.name if result.device else "",
        date=record_date(),
        summary=rewrite_summary(result),
        attempts=result.attempts,
        stop_reason=str(result.stop),
        stop_kind=result.stop.kind,
        original_hash=original_hash,
        rewritten_hash=rewritten_hash,
        launch_todo=result.launch_todo,
        baseline_gbps=result.baseline.achieved_gbps,
        baseline_gflops=result.baseline.achieved_gflops,
        roofline=roofline(target, result.device),
        simulated=result.simulated,
        history=result.records,
    )


# ------------------------------------------------------------------------------------- compare


class CompareRole(str, Enum):
    """Which side of a comparison a kernel was."""

    ORIGINAL = "original"
    REWRITE = "rewrite"


@dataclass(frozen=True)
class CompareRecord:
    """A "Compare with…" a kernel took part in, kept on both kernels: ``role`` says which side this
    kernel was, ``other`` names the other (``FILE:NAME`` when in another file); ``status`` is the
    rewrite's verdict and ``speedup`` the rewrite's over the original's."""

    run_id: str
    role: CompareRole
    other: str
    verified: bool
    status: Status
    headline: str  # "verified, 2.10x [...]" or the reason it did not verify
    speedup: float
    speedup_low: float
    speedup_high: float
    original_ms: float
    rewrite_ms: float
    device: str
    date: str
    kernel_hash: str = ""  # kernel_hash of this kernel when compared
    simulated: bool = False  # run on the simulated GPU: made-up numbers, not a measurement


def compare_record(run_id: str, found: Comparison) -> CompareRecord:
    """The record of a comparison, before it is put on a kernel (``role``, ``other`` and
    ``kernel_hash`` are each side's: ``dataclasses.replace`` them)."""
    c, base = found.candidate, found.result.baseline
    device = found.result.device
    return CompareRecord(
        run_id=run_id,
        role=CompareRole.ORIGINAL,
        other="",
        verified=found.verified,
        status=c.status,
        headline=headline(found),
        speedup=c.speedup,
        speedup_low=c.speedup_low,
        speedup_high=c.speedup_high,
        original_ms=base.timing.median_ms if base.timing else 0.0,
        rewrite_ms=c.timing.median_ms if c.timing else 0.0,
        device=device.name if device else "",
        date=record_date(),
        simulated=device is not None and device.simulated,
    )


# ------------------------------------------------------------------------------------- profile


@dataclass(frozen=True)
class ProfiledKernel:
    """One kernel of a profile run: ``label`` ``original`` or ``rewrite``, its verdict (``status``,
    ``message``) and Nsight Compute's metrics, or why there are none (``profile.available``)."""

    label: str
    description: str
    profile: Profile
    status: Status = Status.OK
    message: str = ""


@dataclass(frozen=True)
class ProfileRecord:
    """A Nsight Compute profile of a kernel (and of a rewrite of it) at the bench problem."""

    run_id: str
    problem: str
    device: str
    date: str
    kernels: tuple[ProfiledKernel, ...]  # the original first
    kernel_hash: str = ""  # kernel_hash of the kernel when profiled


# ------------------------------------------------------------------------------------- per kernel


@dataclass(frozen=True)
class KernelResults:
    """The last result of each kind a kernel has (None where it has none)."""

    benchmark: BenchmarkRecord | None = None
    optimize: OptimizeRecord | None = None
    compare: CompareRecord | None = None
    profile: ProfileRecord | None = None
