"""The proposer interface: what a :class:`Proposer` gets (:class:`OptimizeContext`) and the run's
budget (:class:`OptimizeBudget`, :func:`parse_budget`)."""

from __future__ import annotations

import abc
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.proposal import Attempt, Proposal
from agent.target import Target
from base.errors import InputError
from sandbox.contract import (
    CandidateResult,
    DeviceInfo,
)


@dataclass(frozen=True)
class OptimizeContext:
    """What a proposer gets: the target, where it runs, the baseline's measured verdict, the seed.

    ``cancel`` is set when the run stops; a proposer blocked on I/O should give up promptly.
    ``profile`` evaluates a proposal once more under Nsight Compute (the result's ``profile``); it
    blocks the proposer's thread while the sandbox works and raises ``ExecutorError`` like an evaluation.
    """

    target: Target
    device: DeviceInfo | None
    baseline: CandidateResult
    seed: int
    budget: OptimizeBudget
    cancel: threading.Event
    profile: Callable[[Proposal], CandidateResult] | None = None  # verify + Nsight Compute, blocking


class Proposer(abc.ABC):
    """Proposes rewrites.  All methods are called from one thread (the loop's proposer thread).

    ``propose`` returns up to ``n`` proposals; it may block (an LLM request) but should return
    promptly once ``context.cancel`` is set.  Returning an empty list means "nothing until I see
    more results": the loop then waits for the outstanding evaluations, calls :meth:`observe` and
    asks again; if nothing is outstanding the run ends (the proposer is exhausted).
    ``history`` holds every attempt observed so far, in order.  Raising ends the run (the best
    candidate so far is kept) with ``Stop(StopKind.PROPOSER_FAILED, <the exception's message>)``.
    """

    name: str = "proposer"

    @abc.abstractmethod
    def propose(self, context: OptimizeContext, history: Sequence[Attempt], n: int) -> list[Proposal]: ...

    def observe(self, attempts: Sequence[Attempt]) -> None:  # noqa: B027 - optional hook
        """Results of the proposals of one batch, in proposal order."""

    @property
    def tokens_used(self) -> int:
        """LLM tokens spent so far (prompt + completion); counted against the token budget."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and pools."""


@dataclass(frozen=True)
class OptimizeBudget:
    """When to stop: wall seconds, candidates evaluated, LLM tokens (None: unlimited).

    The wall time is the search's: it counts from the moment the original kernel has been measured
    (the baseline: compile, verification at every size, timing), so a slow original does not eat
    the time its candidates need.  The baseline's own time is reported
    (:attr:`OptimizeResult.baseline_seconds`) and bounded by the sandbox's per-request timeout."""

    wall_s: float | None = 60.0
    candidates: int | None = None
    tokens: int | None = None


class BudgetError(InputError):
    """A budget (``--budget``, a bench script's) does not parse; the message says which part."""


_BUDGET_PART = re.compile(r"^(\d+(?:\.\d+)?)(s|m|h|c|k|M|t)?$")


def parse_budget(text: str) -> OptimizeBudget:
    """``"60s"``, ``"5m"``, ``"40c"`` (candidates), ``"200k"`` / ``"1M"`` / ``"5000t"`` (tokens),
    comma-separated; a plain number is seconds.  Unnamed parts are unlimited, except wall time,
    which defaults to 60 s when no part is given.  Raises :class:`BudgetError` with a one-line reason."""
    wall: float | None = None
    candidates: int | None = None
    tokens: int | None = None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise BudgetError("empty budget")
    for part in parts:
        m = _BUDGET_PART.match(part)
        if not m:
            raise BudgetError(f"bad budget part {part!r} (examples: 60s, 5m, 40c, 200k)")
        value, unit = float(m[1]), m[2] or "s"
        if value <= 0:
            raise BudgetError(f"budget part {part!r} must be positive")
        if value > 1e12:  # 400 digits would be an infinite float and no integer
            raise BudgetError(f"budget part {part[:20]!r}... is too large (at most 10^12)")
        if unit in "smh":
            wall = value * {"s": 1, "m": 60, "h": 3600}[unit]
        elif unit == "c":
            candidates = int(value)
        else:
            tokens = int(value * {"k": 1_000, "M": 1_000_000, "t": 1}[unit])
    return OptimizeBudget(wall_s=wall, candidates=candidates, tokens=tokens)
