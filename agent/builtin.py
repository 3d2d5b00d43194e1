"""The built-in proposer: composes :mod:`engine` and learns which to try from measurements.

No LLM, no network.  A candidate is a :class:`Config`: one value per *arm* (transformation
family) — the structural rewrite (a registered pass with one parameter value, or a
composition of passes, each matched on the previous one's result: :mod:`engine.compose`),
the block size, ``__restrict__``/``const``, ``__ldg``, fast math,
``#pragma unroll`` and ``__launch_bounds__``.  Rendering a config applies its transformations in
that order to the original kernel (:func:`engine.apply_all`).

The search, seeded and deterministic for the same results:

1. **Probe.**  Each arm's values are tried on the original kernel; those that do not apply are
   dropped (the reason is logged); the structural rewrites that apply are extended into
   compositions (the passes that match each result, best prior first, within a budget), which
   join the structural arm's values.  The first batch is a composite guess alone (the first
   structural rewrite that applies — each registered pass that matches (:mod:`engine.registry`)
   with its guessed parameters, and the best composition building on that guess, else a
   histogram, widest vectors, shuffles —, block 256,
   restrict: a batch this small is measured within seconds, so even a short budget gets it); the
   next ones hold every arm's values on their own.
2. **Climb.**  Afterwards the incumbent is the fastest verified config.  Each batch proposes its
   unseen neighbours (one arm changed) ordered by the arm's upper confidence bound (UCB1 over the
   measured log-speedup gain of changing that arm), after a "merge" of the incumbent with every
   arm's best value seen so far.  A failed candidate counts as a large loss for its arm.
3. It ends when every neighbour of the incumbent has been measured (the loop then stops with
   "proposer exhausted") or the budget runs out.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from agent.proposal import Attempt, Proposal
from agent.proposer import OptimizeContext, Proposer
from agent.target import Target, TargetError
from cudasrc import specs as spec_mod
from cudasrc.launch import LaunchChange
from cudasrc.source import Document
from engine import NotApplicable, Subject, Transform, apply_all
from engine.compose import Chain, compositions
from engine.elementwise import GridStride, Vectorize
from engine.histogram import SharedHistogram
from engine.mechanical import (
    BlockSize,
    FastMath,
    LaunchBounds,
    ReadOnlyLoads,
    RestrictConst,
    Unroll,
)
from engine.passes import Apply
from engine.registry import PASSES
from engine.registry import candidates as structural_candidates
from engine.warp_reduction import WarpReduction
from sandbox.contract import DeviceInfo, Status

log = logging.getLogger(__name__)

BLOCKS_1D = ((64,), (128,), (256,), (512,), (1024,))
BLOCKS_2D = ((32, 8), (32, 4), (16, 16), (32, 16), (64, 4), (16, 8))
FAILED_GAIN = -1.0  # log-speedup gain charged to an arm whose change broke the candidate


@dataclass(frozen=True)
class Config:
    """One candidate: a value per arm (None/False/0: leave that aspect as written)."""

    shape: Transform | None = None
    block: tuple[int, ...] | None = None
    restrict: bool = False
    ldg: bool = False
    fastmath: bool = False
    unroll: int = 0
    bounds: bool = False

    def transforms(self) -> tuple[Transform, ...]:
        out: list[Transform] = [self.shape] if self.shape is not None else []
        out += [RestrictConst()] if self.restrict else []
        out += [ReadOnlyLoads()] if self.ldg else []
        out += [FastMath()] if self.fastmath else []
        out += [Unroll(self.unroll)] if self.unroll else []
        out += [BlockSize(self.block)] if self.block is not None else []
        out += [LaunchBounds()] if self.bounds else []
        return tuple(out)

    @property
    def key(self) -> str:
        return repr(self)

    def with_(self, arm: str, value: object) -> Config:
        """This config with ``arm`` set to ``value``."""
        changes: dict[str, Any] = {arm: value}
        return replace(self, **changes)


ARMS = tuple(f.name for f in fields(Config))


def _values(arm: str, block_dims: int, device: DeviceInfo | None) -> tuple[object, ...]:
    """Every value the search may give an arm, the default first: the shapes are the registry's
    passes with the parameter values each searches on ``device`` (:mod:`engine.registry`)."""
    if arm == "shape":
        return (None, *structural_candidates(device))
    if arm == "block":
        return (None, *(BLOCKS_1D if block_dims == 1 else BLOCKS_2D))
    if arm == "unroll":
        return (0, 2, 4, 8)
    return (False, True)


def subject_for(target: Target) -> Subject:
    """The target's kernel definition with its spec (re-read from the file's text); raises
    :class:`~agent.target.TargetError` when the text has no kernel there or no usable spec."""
    doc = Document(target.text, target.path)
    k = doc.kernel_at(target.text.count("\n", 0, target.definition_start))
    if k is None:
        raise TargetError(f"no kernel at the definition of {target.kernel}")
    spec, errors = spec_mod.parse(k, doc.type_aliases, doc.integer_constants)
    if spec is None or errors:
        raise TargetError(f"{target.kernel} has no usable spec")
    return Subject(target.definition, spec, context=target.baseline.source)


class BuiltinProposer(Proposer):
    """Source transformations plus a bandit-guided local search over their parameters."""

    name = "builtin"

    def __init__(self) -> None:
        self._base: Subject | None = None
        self._arms: dict[str, tuple[object, ...]] = {}
        self._rng = random.Random(0)
        self._proposed: dict[str, Config] = {}  # key -> config, proposed (pending or measured)
        self._codes: set[tuple[str, LaunchChange | None]] = set()
        self._score: dict[Config, float] = {}  # measured speedup, 0 when not verified
        self._parent: dict[Config, tuple[Config, str]] = {}  # child -> (parent, arm changed)
        self._gains: dict[str, list[float]] = {arm: [] for arm in ARMS}

    # ------------------------------------------------------------------ Proposer

    def propose(self, context: OptimizeContext, history: Sequence[Attempt], n: int) -> list[Proposal]:
        if self._base is None:
            self._start(context)
            n = len(self._firsts())  # the composite guesses alone first: a short budget measures them
        out: list[Proposal] = []
        for config, parent, arm in self._ordered():
            if len(out) >= n or context.cancel.is_set():
                break
            if config.key in self._proposed:
                continue
            self._proposed[config.key] = config
            proposal = self._render(config)
            if proposal is None:
                continue
            if parent is not None:
                self._parent[config] = (parent, arm)
            out.append(proposal)
        return out

    def observe(self, attempts: Sequence[Attempt]) -> None:
        for a in attempts:
            config = self._proposed.get(a.proposal.key)
            if config is None or a.result.status is Status.CANCELLED:
                continue
            ok = a.result.status is Status.OK and a.result.speedup > 0
            self._score[config] = a.result.speedup if ok else 0.0
            parent, arm = self._parent.get(config, (None, ""))
            if parent is None:
                continue
            before = 1.0 if parent == Config() else self._score.get(parent, 0.0)
            if before <= 0:
                continue
            self._gains[arm].append(math.log(a.result.speedup / before) if ok else FAILED_GAIN)

    # ------------------------------------------------------------------ search

    def _start(self, context: OptimizeContext) -> None:
        self._base = base = subject_for(context.target)
        self._rng = random.Random(context.seed)
        structural: list[tuple[Apply, Subject]] = []  # the passes that apply, with their results
        for arm in ARMS:
            kept: list[object] = []
            for value in _values(arm, len(base.spec.block), context.device):
                config = Config().with_(arm, value)
                outcome = apply_all(base, config.transforms())
                if isinstance(outcome, NotApplicable):
                    log.info(
                        "%s: %s=%r does not apply: %s", context.target.kernel, arm, value, outcome.reason
                    )
                else:
                    kept.append(value)
                    if isinstance(value, Apply):
                        structural.append((value, outcome))
            self._arms[arm] = tuple(kept)
        chains = compositions(base, structural, PASSES, context.device)
        self._arms["shape"] += tuple(chains)
        log.info("%s: compositions %s", context.target.kernel, ", ".join(map(repr, chains)) or "none")
        log.info(
            "%s: arms %s",
            context.target.kernel,
            ", ".join(f"{a}={len(v) - 1}" for a, v in self._arms.items() if len(v) > 1),
        )

    def _ordered(self) -> list[tuple[Config, Config | None, str]]:
        """Candidates in the order to try them: (config, parent, arm changed)."""
        base = Config()
        measured = {c: s for c, s in self._score.items() if s > 0}
        if not measured:  # nothing verified yet: the composite guesses, then every arm on its own
            first: list[tuple[Config, Config | None, str]] = [(g, None, "") for g in self._firsts()]
            singles: list[tuple[Config, Config | None, str]] = [
                (base.with_(arm, v), base, arm) for arm in ARMS for v in self._arms.get(arm, ())[1:]
            ]
            return first + singles
        incumbent = max(measured, key=lambda c: (measured[c], -len(c.key)))
        if measured[incumbent] <= 1.0:
            incumbent = base
        total = sum(len(g) for g in self._gains.values()) + 1
        ranked: list[tuple[float, float, Config, str]] = []
        for arm in ARMS:
            gains = self._gains[arm]
            mean = sum(gains) / len(gains) if gains else 0.0
            bound = mean + math.sqrt(2 * math.log(total) / (len(gains) + 1))
            for v in self._arms.get(arm, ()):
                if getattr(incumbent, arm) != v:
                    ranked.append((bound, self._rng.random(), incumbent.with_(arm, v), arm))
        ranked.sort(key=lambda r: (-r[0], r[1]))
        merged = self._merge(incumbent, measured)
        ordered: list[tuple[Config, Config | None, str]] = [(merged, incumbent, "")]
        return ordered + [(c, incumbent, arm) for _, _, c, arm in ranked]

    def _firsts(self) -> list[Config]:
        """The first batch: for each structural pass of the registry that matches, a composite
        guess with its best guessed parameters, and one with the best composition that starts
        with that guess (:mod:`engine.compose`); otherwise the composite guess of the
        mechanical rewrites."""
        assert self._base is not None
        shapes = self._arms.get("shape", ())
        families: list[tuple[object, ...]] = []
        view = None
        for p in PASSES:
            if not p.leads:
                continue
            try:
                view = view or self._base.normalized.view
                found = p.match(view)
            except Exception as e:  # a pass that fails is not guessed; its candidates still run safely
                log.warning("%s.match failed: %r", p.name, e)
                continue
            if not isinstance(found, NotApplicable):
                best = Apply(p, p.guess(found))
                families.append((best, *(v for v in shapes if isinstance(v, Apply) and v.name == p.name)))
                # and the best composition that builds on the guess (compositions are in prior order)
                composed = next((c for c in shapes if isinstance(c, Chain) and c.steps[0] == best), None)
                families += [(composed,)] if composed is not None else []
        guesses = [self._guess(family) for family in families if family]
        guesses = [g for g in guesses if g.shape is not None]
        return list(dict.fromkeys(guesses)) or [self._guess(())]

    def _guess(self, structural: tuple[object, ...]) -> Config:
        """The usual winner: the first of ``structural`` that applies, else the first mechanical
        rewrite that does (histogram, vectors, shuffles), block 256 (or 32x8), restrict, and fast
        math when every output is bf16 — each part kept only if it composes with the others."""
        assert self._base is not None
        # a privatised histogram over a capped grid-stride loop, when it applies, beats the rest
        histograms = [
            v
            for v in self._arms.get("shape", ())
            if isinstance(v, Apply) and isinstance(v.params, SharedHistogram) and v.params.max_blocks
        ]
        preferred: dict[str, tuple[object, ...]] = {
            "shape": structural
            or (
                *histograms,
                Apply(Vectorize(), Vectorize(16, 1)),
                Apply(WarpReduction(), WarpReduction()),
                Apply(GridStride(), GridStride(1)),
            ),
            "block": ((256,), (32, 8)),
            "restrict": (True,),
            # bf16 outputs round (2^-8) far more than the SFU intrinsics err: fast math from the start
            "fastmath": (True,) if self._bf16_outputs() else (),
        }
        guess = Config()
        for arm, wanted in preferred.items():
            for value in wanted:
                trial = guess.with_(arm, value)
                if value in self._arms.get(arm, ()) and not isinstance(
                    apply_all(self._base, trial.transforms()), NotApplicable
                ):
                    guess = trial
                    break
        return guess

    def _bf16_outputs(self) -> bool:
        assert self._base is not None
        outs = [a for a in self._base.spec.args if isinstance(a, spec_mod.ArraySpec) and a.role != "in"]
        return bool(outs) and all(a.dtype == "bfloat16" for a in outs)

    def _merge(self, incumbent: Config, measured: dict[Config, float]) -> Config:
        """The incumbent with, for each arm, the value of the best measured config changing it."""
        best = incumbent
        for arm in ARMS:
            done = [(s, c) for c, s in measured.items() if getattr(c, arm) != getattr(incumbent, arm)]
            if done:
                s, c = max(done, key=lambda x: (x[0], -len(x[1].key)))
                if s > measured.get(incumbent, 1.0):
                    best = best.with_(arm, getattr(c, arm))
        return best

    def _render(self, config: Config) -> Proposal | None:
        assert self._base is not None
        out = apply_all(self._base, config.transforms())
        if isinstance(out, NotApplicable):
            log.debug("%r does not compose: %s", config, out.reason)
            return None
        launch = out.launch if any((out.launch.grid, out.launch.block, out.launch.shared)) else None
        if out.code == self._base.code and launch is None:
            return None
        fingerprint = (out.code, launch)
        if fingerprint in self._codes:
            return None
        self._codes.add(fingerprint)
        return Proposal(
            code=out.code,
            description="; ".join(out.applied),
            assumptions=out.assumptions,
            launch=launch,
            key=config.key,
        )
