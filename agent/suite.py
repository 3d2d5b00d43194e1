"""A benchmark suite: optimize every kernel with a spec in a folder, summarise like KernelBench.

For each ``.cu``/``.cuh`` file of the folder (sorted), each kernel with a written spec is optimized
with the built-in proposer under the same budget and seed.  :func:`summarize` gives:

- ``fast_1`` / ``fast_1.5``: the share of kernels whose kept rewrite is verified and faster than
  the original by more than 1x / 1.5x (median speedup, and reliably faster: the run's outcome is
  ``improved``, i.e. even the pessimistic bound ``speedup_low`` is above 1);
- ``geomean``: the geometric mean speedup over kernels whose original passed its own checks,
  counting 1.0 where the original is kept (nothing verified was reliably faster).

Each kernel's ``pct_peak_before``/``_after`` is its time against one ceiling, the same before and
after: the device's measured FP32 GEMM rate (``fp32``) when the spec declares flops and the original
is nearer that ceiling than the copy bandwidth, else the measured copy bandwidth (``copy``).
:func:`families` gives the summary and the mean % of ceiling per family: the files' folder under the
suite's directory (``bench/kernels/variants/rows/`` is family ``variants/rows``; the directory's own
files are family ``.``).

Kernels that could not be run (a spec that does not resolve, the original failing its own checks)
count as not fast and are listed with their reason.

Kernels run side by side, one per GPU of the executor (:func:`sandbox.scheduler.gpu_count`), each
pinned to its GPU for the whole run (:func:`sandbox.scheduler.session`); an entry's ``gpus`` says
which GPU measured it.  While it runs, :func:`run_suite` reports each kernel as it finishes (``on_entry``, e.g. a progress
line) and appends it to a JSON-lines file, so a suite stopped half-way keeps what it measured.
Each kernel has a deadline that covers everything done for it (compile, verification, timing,
compute-sanitizer): past it the run is cancelled and the kernel keeps what was decided by then.
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from agent import loop
from agent.builtin import BuiltinProposer
from agent.proposer import OptimizeBudget
from agent.target import Target, TargetError, target_for
from cudasrc import specs as spec_mod
from cudasrc.source import Document
from sandbox import scheduler
from sandbox.contract import CandidateResult, to_json
from sandbox.executor import Executor

log = logging.getLogger(__name__)

EXTENSIONS = (".cu", ".cuh")


@dataclass(frozen=True)
class SuiteEntry:
    """One kernel's row.  ``status``: an :class:`agent.loop.RunOutcome` value, or ``error``."""

    file: str
    kernel: str
    status: str
    speedup: float = 0.0  # of the kept result: 1.0 when the original is kept
    speedup_low: float = 0.0
    speedup_high: float = 0.0
    ceiling: str = ""  # "copy" or "fp32": what the two percentages are of (see the module docstring)
    pct_peak_before: float = 0.0
    pct_peak_after: float = 0.0
    attempts: int = 0
    seconds: float = 0.0
    description: str = ""  # the winning rewrite, or the reason for an error
    assumptions: tuple[str, ...] = ()
    gpus: tuple[int, ...] = ()  # the GPUs that measured this kernel (one, unless a GPU failed mid-run)
    baseline_seconds: float = 0.0  # of ``seconds``: measuring the original, before the search's budget

    @property
    def improved(self) -> bool:
        return self.status == loop.RunOutcome.IMPROVED.value


@dataclass(frozen=True)
class SuiteSummary:
    kernels: int
    improved: int
    fast_1: float
    fast_1_5: float
    geomean: float
    errors: int


@dataclass(frozen=True)
class FamilySummary:
    family: str  # the files' folder relative to the suite's directory ("." for its own files)
    summary: SuiteSummary
    ceilings: tuple[str, ...]  # of the kernels that ran: "copy", "fp32" or both
    pct_peak_before: float  # mean over the kernels that ran of each one's % of its ceiling
    pct_peak_after: float


def ceiling(r: CandidateResult) -> str:
    """The ceiling ``r`` is nearer: ``fp32`` (the FP32 GEMM rate; flops declared) or ``copy``."""
    return "fp32" if r.pct_peak_flops > r.pct_peak_bandwidth else "copy"


def pct_of(r: CandidateResult, name: str) -> float:
    """% of the ceiling ``name`` (:func:`ceiling`) that ``r``'s time reaches."""
    return r.pct_peak_flops if name == "fp32" else r.pct_peak_bandwidth


def find_targets(
    directory: Path, match: str = "*", options: Callable[[Path], tuple[str, ...]] | None = None
) -> Iterator[tuple[str, str, Target | str]]:
    """(file, kernel, target or the reason it cannot be optimized) for each kernel with a spec, in
    the files of ``directory`` whose name matches the glob ``match``; ``options(path)``: each
    file's build configuration."""
    files = (p for p in directory.glob(match) if p.suffix in EXTENSIONS and p.is_file())
    for path in sorted(files):
        doc = Document.from_file(path)
        for k in doc.kernels:
            spec, _ = spec_mod.parse(k, doc.type_aliases, doc.integer_constants)
            if spec is None:
                continue
            try:
                build = options(path) if options is not None else ()
                yield str(path), k.qualified_name, target_for(doc, k.qualified_name, build)
            except TargetError as exc:
                yield str(path), k.qualified_name, str(exc)


def entry(file: str, kernel: str, result: loop.OptimizeResult) -> SuiteEntry:
    best = result.best
    improved = result.outcome is loop.RunOutcome.IMPROVED and best is not None
    kept = best.result if improved and best is not None else result.baseline
    roof = ceiling(result.baseline)
    return SuiteEntry(
        file=file,
        kernel=kernel,
        status=result.outcome.value,
        speedup=result.speedup if improved else 1.0,
        speedup_low=result.speedup_low if improved else 1.0,
        speedup_high=result.speedup_high if improved else 1.0,
        ceiling=roof,
        pct_peak_before=pct_of(result.baseline, roof),
        pct_peak_after=pct_of(kept, roof),
        attempts=result.attempts,
        seconds=result.seconds,
        baseline_seconds=result.baseline_seconds,
        description=best.proposal.description if improved and best is not None else str(result.stop),
        assumptions=result.assumptions if improved else (),
    )


def default_deadline(budget: OptimizeBudget) -> float | None:
    """Seconds a kernel may take in all: its search budget, and as long again (at least a minute)
    for the baseline and compute-sanitizer; None when the budget has no wall time."""
    return None if budget.wall_s is None else budget.wall_s + max(60.0, budget.wall_s)


def run_suite(
    directory: Path,
    executor: Executor,
    *,
    budget: OptimizeBudget,
    seed: int = 0,
    match: str = "*",
    on_entry: Callable[[int, int, SuiteEntry], None] | None = None,
    jsonl: Path | None = None,
    deadline_s: float | None = None,
    options: Callable[[Path], tuple[str, ...]] | None = None,
    settings: loop.LoopSettings | None = None,
) -> tuple[SuiteEntry, ...]:
    """Optimize every kernel with a spec in ``directory``'s files matching ``match`` (see the module
    docstring).  ``on_entry(done, total, entry)`` after each kernel; ``jsonl``: a file each entry
    is appended to as one JSON line; ``deadline_s``: per kernel, everything included (default:
    :func:`default_deadline`); ``settings``: the loop's (the evaluation budget: memory cap...)."""
    targets = list(find_targets(directory, match, options))
    deadline = deadline_s if deadline_s is not None else default_deadline(budget)
    entries: list[SuiteEntry | None] = [None] * len(targets)
    lock = threading.Lock()
    finished = 0

    def one(position: int, file: str, kernel: str, target: Target | str) -> None:
        nonlocal finished
        if isinstance(target, str):
            e = SuiteEntry(file, kernel, "error", description=target)
        else:
            e = optimize_kernel(file, kernel, target, executor, budget, seed, deadline, settings)
        log.info("%s %s: %s %.2fx", file, kernel, e.status, e.speedup)
        with lock:
            entries[position] = e
            finished += 1
            if jsonl is not None:
                with jsonl.open("a", encoding="utf-8") as out:
                    out.write(to_json(e) + "\n")
            if on_entry is not None:
                on_entry(finished, len(targets), e)

    # one kernel per GPU at a time: a kernel's deadline never runs while it waits for a GPU
    workers = max(1, min(scheduler.gpu_count(executor), len(targets)))
    with concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="suite") as pool:
        futures = [pool.submit(one, i, *t) for i, t in enumerate(targets)]
        concurrent.futures.wait(futures, return_when=concurrent.futures.FIRST_EXCEPTION)
        for f in futures:
            f.cancel()  # after a failure of the executor itself (no GPU left): start no more
        for f in futures:
            if not f.cancelled():
                f.result()  # raises that failure
    return tuple(e for e in entries if e is not None)


def optimize_kernel(
    file: str,
    kernel: str,
    target: Target,
    executor: Executor,
    budget: OptimizeBudget,
    seed: int,
    deadline: float | None,
    settings: loop.LoopSettings | None = None,
) -> SuiteEntry:
    """One kernel's run, cancelled at ``deadline`` seconds (a timer sets the run's cancel event,
    which stops the evaluation in flight and skips compute-sanitizer)."""
    cancel = threading.Event()
    timer = threading.Timer(deadline, cancel.set) if deadline is not None else None
    proposer = BuiltinProposer()
    pinned = scheduler.session(executor)  # every request of this kernel on one GPU
    started = time.monotonic()
    try:
        if timer is not None:
            timer.daemon = True
            timer.start()
        result = loop.optimize(
            target, proposer, pinned, budget=budget, seed=seed, settings=settings, cancel=cancel
        )
    finally:
        if timer is not None:
            timer.cancel()
        proposer.close()
        pinned.close()
    e = replace(entry(file, kernel, result), gpus=pinned.gpus)
    if cancel.is_set():
        why = f"stopped at its {deadline:.0f} s deadline after {time.monotonic() - started:.0f} s"
        e = replace(e, description=f"{why}; {e.description}" if e.description else why)
    return e


def _ran(entries: tuple[SuiteEntry, ...]) -> list[SuiteEntry]:
    """The entries whose original passed its checks (the ones with a speedup)."""
    return [
        e for e in entries if e.status in (loop.RunOutcome.IMPROVED.value, loop.RunOutcome.NOT_IMPROVED.value)
    ]


def summarize(entries: tuple[SuiteEntry, ...]) -> SuiteSummary:
    n = len(entries)
    ran = _ran(entries)
    geomean = math.exp(sum(math.log(e.speedup) for e in ran) / len(ran)) if ran else 0.0
    return SuiteSummary(
        kernels=n,
        improved=sum(e.improved for e in entries),
        fast_1=sum(e.improved and e.speedup > 1.0 for e in entries) / n if n else 0.0,
        fast_1_5=sum(e.improved and e.speedup > 1.5 for e in entries) / n if n else 0.0,
        geomean=geomean,
        errors=n - len(ran),
    )


def family(file: str, directory: Path) -> str:
    """A suite file's family: its folder relative to the suite's ``directory`` ("." for its own)."""
    return Path(file).parent.relative_to(directory).as_posix()


def families(entries: tuple[SuiteEntry, ...], directory: Path) -> tuple[FamilySummary, ...]:
    """Per family (:func:`family`, sorted): the summary and the mean % of ceiling before and after."""
    groups: dict[str, list[SuiteEntry]] = {}
    for e in entries:
        groups.setdefault(family(e.file, directory), []).append(e)
    out = []
    for name in sorted(groups):
        group = tuple(groups[name])
        ran = _ran(group)
        out.append(
            FamilySummary(
                family=name,
                summary=summarize(group),
                ceilings=tuple(sorted({e.ceiling for e in ran})),
                pct_peak_before=sum(e.pct_peak_before for e in ran) / len(ran) if ran else 0.0,
                pct_peak_after=sum(e.pct_peak_after for e in ran) / len(ran) if ran else 0.0,
            )
        )
    return tuple(out)
