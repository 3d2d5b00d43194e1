"""Compositions of passes: several structural rewrites in one candidate, and their search.

A :class:`Chain` is a sequence of :class:`~engine.passes.Apply` steps, itself a
:class:`~engine.Transform`: each step is matched on the kernel *the previous step wrote*,
re-analysed through the same front end and view (``subject.normalized.view``: rewrites produce
source, and the next pass matches on the new view), e.g. a launch fill (a thread per row) then
16-byte packs of the elementwise kernel it made.  Composition is hygienic:

- subjects are immutable: a step that refuses (or raises: :func:`~engine.safe_apply`)
  makes the whole chain ``NotApplicable`` naming the step and the reason, and leaves the earlier
  steps' results untouched (the first step alone stays a candidate of its own);
- every step writes through the one :class:`~engine.passes.Emitter`, whose fresh names
  avoid every identifier of the code it edits, the earlier steps' ``ca_`` names included.

:func:`compositions` is the search's enumeration: from the structural rewrites that apply to the
original, it extends each, best prior first, by every registered pass that matches the result,
with that pass's parameter values, within a budget of rewrites.  The *prior* of a chain is cheap,
computed before anything is measured: the sum over its steps of each value's rank in its pass's
space on that step's kernel (the pass's guess first, rank 0), then fewer steps, then the
registry's order.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from engine import NotApplicable, Outcome, Subject, Transform, Transformed, safe_apply
from engine.passes import Apply, Pass
from sandbox.contract import DeviceInfo

log = logging.getLogger(__name__)

MAX_STEPS = 3  # passes in one candidate
MAX_CHAINS = 16  # compositions the search keeps per kernel
MAX_REWRITES = 48  # rewrites tried while extending (the enumeration's budget) ...
MAX_EXTENDED = 8  # ... and rewritten kernels analysed to be extended


@dataclass(frozen=True)
class Chain(Transform):
    """Passes applied one after the other, each matched on the previous one's result."""

    steps: tuple[Apply, ...]

    def apply(self, subject: Subject) -> Outcome:
        out = subject
        for k, step in enumerate(self.steps, 1):
            after = safe_apply(step, out)
            if isinstance(after, NotApplicable):
                done = ", then ".join(out.applied[len(subject.applied) :]) or "the kernel as written"
                return NotApplicable(f"step {k} ({step!r}) does not apply after {done}: {after.reason}")
            out = after
        new = out.applied[len(subject.applied) :]
        extra = tuple(a for a in out.assumptions if a not in subject.assumptions)
        launch = out.launch if out.launch != subject.launch else None
        return Transformed(out.code, ", then ".join(new), launch, extra)

    def __repr__(self) -> str:
        return " + ".join(repr(s) for s in self.steps)


def _ranked(p: Pass[Any], subject: Subject, device: DeviceInfo | None) -> list[Hashable] | None:
    """``p``'s parameter values on ``subject``, its guess first; None when ``p`` does not match."""
    try:
        found = p.match(subject.normalized.view)
        if isinstance(found, NotApplicable):
            return None
        guess = p.guess(found)
    except Exception as e:  # a pass that fails to match is not extended with; safe_apply logs the rest
        log.debug("%s.match failed on a composed kernel: %r", p.name, e)
        return None
    values = [v for v in p.space_for(device) if p.accepts(v)]
    return [guess, *(v for v in values if v != guess)] if p.accepts(guess) else values


def compositions(
    base: Subject,
    firsts: Sequence[tuple[Apply, Subject]],
    passes: Sequence[Pass[Any]],
    device: DeviceInfo | None = None,
    *,
    limit: int = MAX_CHAINS,
    budget: int = MAX_REWRITES,
    extended: int = MAX_EXTENDED,
    steps: int = MAX_STEPS,
) -> list[Chain]:
    """Chains of ``passes`` that apply to ``base``, best prior first (at most ``limit``): each
    starts with one of ``firsts`` (a structural rewrite that applies to ``base``, with its result)
    and adds, one step at a time, every pass not yet in it that matches the result.  At most
    ``budget`` rewrites are tried and ``extended`` chains are extended (each costs an analysis
    of its result); each refusal is logged with its reason."""
    order = {p.name: k for k, p in enumerate(passes)}
    ranks: dict[str, list[Hashable]] = {}
    for p in passes:
        ranked = _ranked(p, base, device)
        if ranked is not None:
            ranks[p.name] = ranked
    # (prior, steps, registry position of the last pass, tie) -> chain and its result
    heap: list[tuple[int, int, int, int, tuple[Apply, ...], Subject]] = []
    for tie, (first, result) in enumerate(firsts):
        values = ranks.get(first.name, [])
        rank = values.index(first.params) if first.params in values else len(values)
        heapq.heappush(heap, (rank, 1, order.get(first.name, 0), tie, (first,), result))
    found: list[tuple[int, int, int, int, Chain]] = []
    tie = len(firsts)
    while heap and budget > 0 and extended > 0 and len(found) < limit:
        prior, n, _, _, chain, subject = heapq.heappop(heap)
        if n >= steps:
            continue
        extended -= 1
        used = {s.name for s in chain}
        for p in passes:
            if p.name in used:
                continue
            ranked = _ranked(p, subject, device)
            for rank, params in enumerate(ranked or ()):
                if budget <= 0:
                    break
                budget -= 1
                step = Apply(p, params)
                after = safe_apply(step, subject)
                if isinstance(after, NotApplicable):
                    log.debug("%r + %r is refused: %s", Chain(chain), step, after.reason)
                    continue
                if after.code == subject.code and after.launch == subject.launch:
                    continue
                tie += 1
                longer = (*chain, step)
                found.append((prior + rank, n + 1, order[p.name], tie, Chain(longer)))
                heapq.heappush(heap, (prior + rank, n + 1, order[p.name], tie, longer, after))
    found.sort(key=lambda f: f[:4])
    return [f[4] for f in found[:limit]]
