"""A benchmark suite: optimize every kernel with a spec in a folder, summarise like KernelBench.

For each ``.cu``/``.cuh`` file of the folder (sorted), each kernel with a written spec is optimized
with the built-in proposer under the same budget and seed.  :func:`summarize` gives:

- ``fast_1`` / ``fast_1.5``: the share of kernels whose kept rewrite is verified and faster than
  the original by more than 1x / 1.5x (median speedup, and reliably faster: the run's outcome is
  ``improved``, i.e. even the pessimistic bound ``speedup_low`` is above 1);
- ``geomean``: the geometric mean speedup over kernels whose original passed its own checks,
  counting 1.0 where the original is kept (nothing verified was reliably faster).

Kernels that could not be run (a spec that does not resolve, the original failing its own checks)
count as not fast and are listed with their reason.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from agent import loop
from agent import spec as spec_mod
from agent.builtin import BuiltinProposer
from agent.source import Document
from sandbox.contract import CandidateResult
from sandbox.executor import Executor

log = logging.getLogger(__name__)

EXTENSIONS = (".cu", ".cuh")


@dataclass(frozen=True)
class SuiteEntry:
    """One kernel's row.  ``status``: an :class:`agent.loop.Outcome` value, or ``error``."""

    file: str
    kernel: str
    status: str
    speedup: float = 0.0  # of the kept result: 1.0 when the original is kept
    speedup_low: float = 0.0
    speedup_high: float = 0.0
    pct_peak_before: float = 0.0
    pct_peak_after: float = 0.0
    attempts: int = 0
    seconds: float = 0.0
    description: str = ""  # the winning rewrite, or the reason for an error
    assumptions: tuple[str, ...] = ()

    @property
    def improved(self) -> bool:
        return self.status == loop.Outcome.IMPROVED.value


@dataclass(frozen=True)
class SuiteSummary:
    kernels: int
    improved: int
    fast_1: float
    fast_1_5: float
    geomean: float
    errors: int


def pct_peak(r: CandidateResult) -> float:
    """% of the nearer roofline ceiling: bandwidth, or compute when the spec declares flops."""
    return max(r.pct_peak_bandwidth, r.pct_peak_flops)


def find_targets(directory: Path, match: str = "*") -> Iterator[tuple[str, str, loop.Target | str]]:
    """(file, kernel, target or the reason it cannot be optimized) for each kernel with a spec, in
    the files of ``directory`` whose name matches the glob ``match``."""
    files = (p for p in directory.glob(match) if p.suffix in EXTENSIONS and p.is_file())
    for path in sorted(files):
        doc = Document.from_file(path)
        for k in doc.kernels:
            spec, _ = spec_mod.parse(k, doc.type_aliases)
            if spec is None:
                continue
            try:
                yield str(path), k.qualified_name, loop.target_for(doc, k.qualified_name)
            except loop.TargetError as exc:
                yield str(path), k.qualified_name, str(exc)


def entry(file: str, kernel: str, result: loop.OptimizeResult) -> SuiteEntry:
    best = result.best
    improved = result.outcome is loop.Outcome.IMPROVED and best is not None
    kept = best.result if improved and best is not None else result.baseline
    return SuiteEntry(
        file=file,
        kernel=kernel,
        status=result.outcome.value,
        speedup=result.speedup if improved else 1.0,
        speedup_low=result.speedup_low if improved else 1.0,
        speedup_high=result.speedup_high if improved else 1.0,
        pct_peak_before=pct_peak(result.baseline),
        pct_peak_after=pct_peak(kept),
        attempts=result.attempts,
        seconds=result.seconds,
        description=best.proposal.description if improved and best is not None else result.stop_reason,
        assumptions=result.assumptions if improved else (),
    )


def run_suite(
    directory: Path,
    executor: Executor,
    *,
    budget: loop.OptimizeBudget,
    seed: int = 0,
    match: str = "*",
    on_entry: Callable[[SuiteEntry], None] | None = None,
) -> tuple[SuiteEntry, ...]:
    """Optimize every kernel with a spec in ``directory``'s files matching ``match`` (see the module
    docstring)."""
    entries: list[SuiteEntry] = []
    for file, kernel, target in find_targets(directory, match):
        if isinstance(target, str):
            e = SuiteEntry(file, kernel, "error", description=target)
        else:
            proposer = BuiltinProposer()
            try:
                e = entry(file, kernel, loop.optimize(target, proposer, executor, budget=budget, seed=seed))
            finally:
                proposer.close()
        log.info("%s %s: %s %.2fx", file, kernel, e.status, e.speedup)
        entries.append(e)
        if on_entry is not None:
            on_entry(e)
    return tuple(entries)


def summarize(entries: tuple[SuiteEntry, ...]) -> SuiteSummary:
    n = len(entries)
    ran = [e for e in entries if e.status in (loop.Outcome.IMPROVED.value, loop.Outcome.NOT_IMPROVED.value)]
    geomean = math.exp(sum(math.log(e.speedup) for e in ran) / len(ran)) if ran else 0.0
    return SuiteSummary(
        kernels=n,
        improved=sum(e.improved for e in entries),
        fast_1=sum(e.improved and e.speedup > 1.0 for e in entries) / n if n else 0.0,
        fast_1_5=sum(e.improved and e.speedup > 1.5 for e in entries) / n if n else 0.0,
        geomean=geomean,
        errors=n - len(ran),
    )
