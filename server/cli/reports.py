"""What each command prints with ``--json``: one typed report per command, serialised by the
contract's converter (:func:`sandbox.contract.to_dict`; :func:`sandbox.contract.from_dict` reads one
back), never a dictionary built by hand.  Field names are the JSON keys.  A report carries the
lower layers' records as they are (``optimize``: ``agent.records.OptimizeRecord``, the record the
editor stores; ``agent.compare.CandidateRef``;
``profile`` prints ``agent.profile.ProfileReport`` itself, its kernels the stored
``agent.records.ProfiledKernel``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from agent.attempts import SizeCheck, size_checks, verdict_summary
from agent.capture import CaptureEdit
from agent.check import FileCheck, KernelCheck
from agent.compare import CandidateRef, Comparison, reason_text
from agent.loop import OptimizeResult
from agent.records import CompareRecord, OptimizeRecord, compare_record, optimize_record
from agent.suite import FamilySummary, SuiteEntry, SuiteSummary
from agent.target import Target
from agent.trajectory import simulated_path
from cudasrc.launch import LaunchChange, TextEdit
from cudasrc.source import Document, Issue, Kernel, LaunchSite
from cudasrc.specs import Evidence, SpecError, render, spec_for
from sandbox.capture import CaptureRun
from sandbox.contract import CandidateResult, Check, DeviceInfo, EvalResult


@dataclass(frozen=True)
class SpecListing:
    """A kernel's spec: written (``parsed``) or ``inferred``, rendered as text, with its errors."""

    source: str
    text: str
    errors: tuple[SpecError, ...]
    confidence: str | None
    reasons: tuple[str, ...]
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class KernelListing:
    kernel: Kernel
    launches: tuple[LaunchSite, ...]
    spec: SpecListing


@dataclass(frozen=True)
class KernelsReport:
    """``kernels``: the kernels of a file, their launch sites and specs."""

    path: str
    kernels: tuple[KernelListing, ...]
    issues: tuple[Issue, ...]


@dataclass(frozen=True)
class CheckReport:
    """``check``: each kernel compiled on its own (``ok``: all compile, every written spec is valid)."""

    path: str
    arch: str
    kernels: tuple[KernelCheck, ...]
    issues: tuple[Issue, ...]
    ok: bool


@dataclass(frozen=True)
class BenchReport:
    """``bench``: a kernel timed under its spec."""

    path: str
    kernel: str
    problem: str
    device: DeviceInfo | None
    simulated: bool
    result: CandidateResult


@dataclass(frozen=True)
class BestCandidate:
    candidate_id: str
    description: str
    code: str
    kernel: str | None
    result: CandidateResult


@dataclass(frozen=True)
class OptimizeReport:
    """``optimize``: the run's record (:class:`agent.records.OptimizeRecord`, the one the editor
    stores and shows: outcome, stop, speedups, every attempt's verdict in ``history``), and what
    only the command line shows: the baseline's and the best candidate's verdicts and code, the
    verification per size, the launch change, the diff, where it was written."""

    file: str
    kernel: str
    record: OptimizeRecord
    cancelled: bool
    baseline: CandidateResult
    best: BestCandidate | None
    assumptions: tuple[str, ...]
    verification: tuple[SizeCheck, ...]
    launch: LaunchChange | None
    launch_edits: tuple[TextEdit, ...]
    launch_sites: int
    diff: str
    verdicts: str
    tokens: int
    seconds: float
    baseline_seconds: float
    device: DeviceInfo | None
    written: str | None
    backup: str | None
    trajectory: str | None


@dataclass(frozen=True)
class Side:
    """One side of a comparison in brief: its status, time, throughput and resources."""

    status: str
    median_ms: float | None
    gbps: float
    pct_peak_bandwidth: float
    pct_peak_flops: float
    registers: int | None
    spill_bytes: int | None


@dataclass(frozen=True)
class Precision:
    claimed: tuple[str, ...]
    detected: str


@dataclass(frozen=True)
class CompareReport:
    """``compare``: a rewrite verified against the original and timed beside it: the comparison's
    record (:class:`agent.records.CompareRecord`, the one the editor stores: verified, the
    rewrite's status, its speedups), and what only the command line shows."""

    file: str
    kernel: str
    candidate: CandidateRef
    record: CompareRecord
    message: str
    reason: str
    first_failure: Check | None
    original: Side
    rewrite: Side
    launch: LaunchChange | None
    precision: Precision
    verification: tuple[SizeCheck, ...]
    sanitizer: str
    baseline: CandidateResult
    result: CandidateResult
    device: DeviceInfo | None
    simulated: bool


@dataclass(frozen=True)
class CapturedLaunch:
    index: int
    api: str
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int


@dataclass(frozen=True)
class CaptureReport:
    """``capture``: the launch recorded from a run of the program, and the spec written from it."""

    program: tuple[str, ...]
    exit_status: int
    seconds: float
    kernels: dict[str, int]
    launch: CapturedLaunch
    file: str
    kernel: str
    spec: str
    notes: tuple[str, ...]
    errors: tuple[str, ...]
    saved_inputs: dict[str, str]
    diff: str
    written: str | None
    backup: str | None


@dataclass(frozen=True)
class SuiteReport:
    """``suite``: every kernel's entry and the summary (fast_1, fast_1.5, geomean)."""

    directory: str
    device: str
    simulated: bool
    gpus: tuple[int, ...]
    budget: str
    seed: int
    match: str
    kernels: tuple[SuiteEntry, ...]
    summary: SuiteSummary
    families: tuple[FamilySummary, ...]  # per folder under the directory, when there is more than one


# ------------------------------------------------------------------------------------- builders


def kernels_report(doc: Document) -> KernelsReport:
    listed = []
    for k in doc.kernels:
        result = spec_for(doc, k)
        inference = result.inference
        spec = SpecListing(
            source=result.source,
            text=render(result.spec) if result.spec is not None else "",
            errors=result.errors,
            confidence=inference.confidence if inference else None,
            reasons=inference.reasons if inference else (),
            evidence=inference.evidence if inference else (),
        )
        listed.append(KernelListing(k, tuple(doc.launches_of(k.name)), spec))
    return KernelsReport(doc.path or "", tuple(listed), tuple(doc.issues))


def check_report(result: FileCheck) -> CheckReport:
    return CheckReport(result.path, result.arch, result.kernels, result.issues, result.ok)


def bench_report(path: str, target: Target, result: EvalResult) -> BenchReport:
    simulated = result.device is not None and result.device.simulated
    return BenchReport(
        path, target.kernel, target.bench_problem.label, result.device, simulated, result.baseline
    )


def optimize_report(
    target: Target, result: OptimizeResult, written: Path | None, backup: Path | None, log_path: Path | None
) -> OptimizeReport:
    best = result.best
    return OptimizeReport(
        file=target.path,
        kernel=target.kernel,
        record=optimize_record("", target, result),
        cancelled=result.cancelled,
        baseline=result.baseline,
        best=None
        if best is None
        else BestCandidate(
            best.candidate_id,
            best.proposal.description,
            best.proposal.code,
            best.proposal.kernel,
            best.result,
        ),
        assumptions=tuple(result.assumptions),
        verification=result.verification,
        launch=result.launch,
        launch_edits=result.launch_edits,
        launch_sites=result.launch_sites,
        diff=result.diff,
        verdicts=verdict_summary(result.records),
        tokens=result.tokens,
        seconds=result.seconds,
        baseline_seconds=result.baseline_seconds,
        device=result.device,
        written=str(written) if written else None,
        backup=str(backup) if backup else None,
        trajectory=str(simulated_path(log_path) if result.simulated else log_path) if log_path else None,
    )


def _side(r: CandidateResult) -> Side:
    res = r.resources
    return Side(
        status=r.status.value,
        median_ms=r.timing.median_ms if r.timing else None,
        gbps=r.achieved_gbps,
        pct_peak_bandwidth=r.pct_peak_bandwidth,
        pct_peak_flops=r.pct_peak_flops,
        registers=res.registers if res else None,
        spill_bytes=(res.spill_stores + res.spill_loads) if res else None,
    )


def _candidate_text(found: Comparison) -> str:
    """The rewrite as ``--with`` names it: ``FILE:KERNEL`` (or the file alone)."""
    kernel = found.proposal.kernel
    return f"{found.candidate_path}:{kernel}" if kernel else found.candidate_path


def compare_report(found: Comparison) -> CompareReport:
    c, base = found.candidate, found.result.baseline
    return CompareReport(
        file=found.target.path,
        kernel=found.target.kernel,
        candidate=CandidateRef(found.candidate_path, found.proposal.kernel),
        record=replace(compare_record("", found), other=_candidate_text(found)),
        message=c.message,
        reason=reason_text(found),
        first_failure=found.first_failure,
        original=_side(base),
        rewrite=_side(c),
        launch=found.proposal.launch,
        precision=Precision(tuple(found.proposal.precision), c.precision),
        verification=size_checks(c),
        sanitizer=c.sanitizer,
        baseline=base,
        result=c,
        device=found.result.device,
        simulated=found.result.device is not None and found.result.device.simulated,
    )


def capture_report(
    program: tuple[str, ...], run: CaptureRun, found: CaptureEdit, written: Path | None, backup: Path | None
) -> CaptureReport:
    launch, captured = found.launch, found.captured
    return CaptureReport(
        program=program,
        exit_status=run.returncode,
        seconds=run.seconds,
        kernels=dict(run.kernels),
        launch=CapturedLaunch(
            launch.index, launch.api, launch.kernel, launch.grid, launch.block, launch.smem
        ),
        file=found.doc.path or "",
        kernel=captured.kernel.qualified_name,
        spec=captured.text,
        notes=tuple(captured.notes),
        errors=tuple(found.errors),
        saved_inputs={k: str(Path(run.save_dir) / v) for k, v in captured.saved.items()},
        diff=found.diff,
        written=str(written) if written else None,
        backup=str(backup) if backup else None,
    )
