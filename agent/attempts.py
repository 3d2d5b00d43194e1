"""Verdicts as a run's result reports them: one flat :class:`AttemptRecord` per attempt, the
one-line summary of a run's verdicts, and the winner's verification per problem size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent.proposal import Attempt
from agent.target import Target
from agent.trajectory import hack_rule
from sandbox.contract import (
    CandidateResult,
    Check,
    Status,
)


@dataclass(frozen=True)
class AttemptRecord:
    """One attempt's verdict as a run's result reports it (CLI ``--attempts``/``--json``, the
    editor's run result): flat, JSON-ready.  Numbers are 0 (``first_bad_index`` -1, ``reward``
    None) where the verdict has none."""

    index: int  # 0-based, in evaluation order
    candidate_id: str
    description: str
    status: Status
    message: str  # the sandbox's words (a compile error at FILE:LINE:COL of the candidate's file)
    rule: str = ""  # the rule a rejected/implausible candidate broke (agent.trajectory.hack_rule)
    duplicate_of: str = ""  # the earlier identical candidate whose verdict this reuses
    problem: str = ""  # the failing check's problem size (else the one closest to its bound)
    output: str = ""  # that check's output argument
    first_bad_index: int = -1  # its first element out of bounds (-1: none)
    values: str = ""  # what that check saw ("expected 1.5, got 2 (error 0.5, bound 0.001: ...)")
    error_ratio: float = 0.0  # its largest error as a share of its bound (<= 1 passes)
    compile_line: int = 0  # the first compile error, 1-based, in the candidate's file (0: none)
    compile_column: int = 0
    compile_log: str = ""  # the compiler's log from the first error (a few lines)
    speedup: float = 0.0
    speedup_low: float = 0.0
    speedup_high: float = 0.0
    median_ms: float = 0.0
    registers: int = 0
    spill_stores: int = 0  # bytes
    spill_loads: int = 0  # bytes
    reward: float | None = None


COMPILE_LOG_LINES = 8  # lines of the compiler's log an AttemptRecord keeps


def attempt_record(target: Target, attempt: Attempt) -> AttemptRecord:
    """``attempt`` as the run's result reports it, its compile error placed in the candidate's file."""
    r = attempt.result
    failing = [c for c in r.checks if not c.ok]
    check = failing[0] if failing else max(r.checks, key=lambda c: c.error_ratio, default=None)
    error = target.compile_error(r, attempt.proposal) if r.status is Status.COMPILE_ERROR else None
    log_lines = r.compile_log.splitlines()
    first = next((i for i, line in enumerate(log_lines) if ": error" in line), 0) if error else 0
    res = r.resources
    return AttemptRecord(
        index=attempt.index,
        candidate_id=attempt.candidate_id,
        description=attempt.proposal.description,
        status=r.status,
        message=target.located(r, attempt.proposal),
        rule=hack_rule(r),
        duplicate_of=attempt.duplicate_of,
        problem=check.label if check else "",
        output=check.arg if check else "",
        first_bad_index=check.first_bad_index if check else -1,
        values=check.detail if check and not check.ok else "",
        error_ratio=check.error_ratio if check else 0.0,
        compile_line=error.line if error else 0,
        compile_column=error.column if error else 0,
        compile_log="\n".join(log_lines[first : first + COMPILE_LOG_LINES]) if error else "",
        speedup=r.speedup,
        speedup_low=r.speedup_low,
        speedup_high=r.speedup_high,
        median_ms=r.timing.median_ms if r.timing else 0.0,
        registers=res.registers if res else 0,
        spill_stores=res.spill_stores if res else 0,
        spill_loads=res.spill_loads if res else 0,
        reward=attempt.reward,
    )


def verdict_summary(records: Sequence[AttemptRecord]) -> str:
    """One line: ``12 candidates: 4 ok, 5 mismatch, 3 compile_error`` (most frequent first)."""
    counts: dict[str, int] = {}
    for a in records:
        counts[a.status.value] = counts.get(a.status.value, 0) + 1
    n = len(records)
    head = f"{n} candidate{'' if n == 1 else 's'}"
    if not counts:
        return head
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return f"{head}: " + ", ".join(f"{v} {k}" for k, v in ranked)


@dataclass(frozen=True)
class SizeCheck:
    """Verification of the winner at one problem size, over all seeds."""

    label: str
    seeds: int
    ok: bool
    max_abs_err: float
    max_rel_err: float
    detail: str = ""  # the failing check's, else the one closest to its bound: measured error and bound
    error_ratio: float = 0.0  # the largest measured error as a share of its bound (<= 1 passes)


def size_checks(r: CandidateResult) -> tuple[SizeCheck, ...]:
    """A result's checks per problem size, over all seeds."""
    by_label: dict[str, list[Check]] = {}
    for c in r.checks:
        by_label.setdefault(c.label, []).append(c)
    return tuple(
        SizeCheck(
            label=label,
            seeds=len(checks),
            ok=all(c.ok for c in checks),
            max_abs_err=max(c.max_abs_err for c in checks),
            max_rel_err=max(c.max_rel_err for c in checks),
            detail=max(checks, key=lambda c: (not c.ok, c.error_ratio)).detail,
            error_ratio=max(c.error_ratio for c in checks),
        )
        for label, checks in by_label.items()
    )
