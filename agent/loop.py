"""The optimize loop: propose candidates, evaluate them in the sandbox, keep the best verified one.

::

    proposer thread                          evaluator (caller's thread)
    ───────────────                          ───────────────────────────
    observe(results of batches < k-1)
    propose(context, history, n) ─ batch k ─▶ queue ─▶ executor.evaluate(EvalRequest)
    ...                                                   │
    ◀──────────────── attempts of batch k ────────────────┘  → trajectory, best, progress events

A :class:`~agent.proposer.Proposer` (the built-in rewrite/autotune engine, :class:`agent.llm.LLMProposer`, or a
test's own) turns a :class:`~agent.target.Target` and the history of earlier :class:`~agent.proposal.Attempt` s
into :class:`~agent.proposal.Proposal` s.  The loop splices each proposal into the kernel's standalone translation unit,
sends batches to an :class:`~sandbox.executor.Executor` and feeds the verdicts back.  Proposing batch
*k* overlaps evaluating batch *k-1*; the proposer sees exactly the results of batches up to *k-2*
(more if it asks to wait by returning nothing), so a deterministic proposer and executor give the
same run for the same seed.

Stops at the first of: the wall-time, candidate or token budget; cancellation (``cancel`` event,
honoured between batches and passed to the executor, which returns unfinished candidates as
``cancelled``); the proposer having nothing more to propose; the proposer or executor failing
(the result's :class:`Stop` says which).
The best verified candidate so far is always kept: the caller gets an :class:`OptimizeResult`.

Untrusted proposals are never compiled or run here: they only travel inside ``EvalRequest`` s.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import math
import queue
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Literal

from agent.attempts import AttemptRecord, SizeCheck, attempt_record, size_checks
from agent.proposal import Attempt, Proposal
from agent.proposer import OptimizeBudget, OptimizeContext, Proposer
from agent.target import Target
from agent.trajectory import RunInfo, TrajectoryLog, reward
from base.errors import CudaAgentError
from cudasrc.launch import (
    LaunchChange,
    LaunchEdits,
    TextEdit,
)
from sandbox.contract import (
    Budget,
    Candidate,
    CandidateResult,
    DeviceInfo,
    EvalOptions,
    EvalRequest,
    EvalResult,
    Progress,
    Status,
)
from sandbox.executor import Executor, ExecutorError

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class LoopSettings:
    batch_size: int = 8  # proposals asked for per batch (one EvalRequest)
    lookahead: int = 1  # batches proposed ahead of the evaluation results
    seeds: int = 3  # verification seeds (drawn from the run's seed)
    eval_budget: Budget = field(default_factory=Budget)
    options: EvalOptions = field(default_factory=EvalOptions)
    sanitize_winner: bool = True  # re-run the winner under compute-sanitizer before reporting it


# --------------------------------------------------------------------------- events, result


EventKind = Literal["baseline", "evaluating", "evaluated", "improved", "finished"]


@dataclass(frozen=True)
class LoopEvent:
    """Progress of a run, for progress bars. ``fraction`` (0..1) is the largest share of any budget
    spent, None when no budget bounds the run."""

    kind: EventKind
    evaluated: int
    fraction: float | None
    best_speedup: float
    message: str = ""


EventFn = Callable[[LoopEvent], None]


class RunOutcome(str, Enum):
    """How a run ended for the kernel."""

    IMPROVED = "improved"  # a verified candidate is faster, even pessimistically (speedup_low > 1)
    NOT_IMPROVED = "not_improved"  # nothing verified was reliably faster
    BASELINE_FAILED = "baseline_failed"  # the original kernel did not pass its own checks


class StopKind(str, Enum):
    """Why a run stopped."""

    PROPOSER_EXHAUSTED = "proposer_exhausted"  # the proposer had nothing more to propose
    WALL_TIME = "wall_time"  # the budget's wall time is spent
    CANDIDATES = "candidates"  # the budget's candidates are evaluated
    TOKENS = "tokens"  # the budget's LLM tokens are spent
    CANCELLED = "cancelled"
    PROPOSER_FAILED = "proposer_failed"  # the proposer raised (detail: its message)
    EXECUTOR_FAILED = "executor_failed"  # the sandbox could not evaluate a batch (detail: why)
    BASELINE_FAILED = "baseline_failed"  # the original kernel failed its own checks (detail: verdict)


_STOP_TEXT = {
    StopKind.PROPOSER_EXHAUSTED: "proposer exhausted",
    StopKind.WALL_TIME: "budget: wall time",
    StopKind.CANDIDATES: "budget: candidates",
    StopKind.TOKENS: "budget: tokens",
    StopKind.CANCELLED: "cancelled",
    StopKind.PROPOSER_FAILED: "proposer failed",
    StopKind.EXECUTOR_FAILED: "executor failed",
    StopKind.BASELINE_FAILED: "baseline",
}


@dataclass(frozen=True)
class Stop:
    """Why a run stopped: ``kind``, and ``detail`` for a failure (the proposer's or executor's
    message, the baseline's verdict).  ``str()`` is the one line shown to people."""

    kind: StopKind
    detail: str = ""

    @property
    def failed(self) -> bool:
        """The proposer or the executor failed (rather than the run ending by its own rules)."""
        return self.kind in (StopKind.PROPOSER_FAILED, StopKind.EXECUTOR_FAILED)

    def __str__(self) -> str:
        text = _STOP_TEXT[self.kind]
        if not self.detail:
            return text
        return f"{text} {self.detail}" if self.kind is StopKind.BASELINE_FAILED else f"{text}: {self.detail}"


@dataclass(frozen=True)
class OptimizeResult:
    outcome: RunOutcome
    stop: Stop
    baseline: CandidateResult
    best: Attempt | None  # the fastest verified attempt (even when not reliably faster)
    attempts: int
    tokens: int
    seconds: float
    device: DeviceInfo | None
    rewritten: str = ""  # the whole file with the rewrite (empty unless improved)
    diff: str = ""  # unified diff against the original file (empty unless improved)
    launch: LaunchChange | None = None  # the winner's launch change, if any
    launch_edits: tuple[TextEdit, ...] = ()  # its edits to the launch sites and the spec (in `rewritten`)
    launch_sites: int = 0  # launch sites of the kernel rewritten
    launch_todo: str = ""  # what the user must still change by hand for the launch ("" when nothing)
    verification: tuple[SizeCheck, ...] = ()
    history: tuple[Attempt, ...] = ()  # every attempt with its verdict, in evaluation order
    baseline_seconds: float = 0.0  # measuring the original (before the wall-time budget starts)
    records: tuple[AttemptRecord, ...] = ()  # ``history`` as reported (attempt_record)

    @property
    def simulated(self) -> bool:
        """The numbers come from the simulated GPU (``sandbox.testing``), not a measurement."""
        return self.device is not None and self.device.simulated

    @property
    def speedup(self) -> float:
        return self.best.result.speedup if self.best else 0.0

    @property
    def speedup_low(self) -> float:
        return self.best.result.speedup_low if self.best else 0.0

    @property
    def speedup_high(self) -> float:
        return self.best.result.speedup_high if self.best else 0.0

    @property
    def assumptions(self) -> tuple[str, ...]:
        return self.best.proposal.assumptions if self.best else ()

    @property
    def cancelled(self) -> bool:
        return self.stop.kind is StopKind.CANCELLED


# --------------------------------------------------------------------------- the loop


def optimize(
    target: Target,
    proposer: Proposer,
    executor: Executor,
    *,
    budget: OptimizeBudget | None = None,
    seed: int = 0,
    settings: LoopSettings | None = None,
    on_event: EventFn | None = None,
    cancel: threading.Event | None = None,
    trajectory: TrajectoryLog | None = None,
) -> OptimizeResult:
    """Run the loop (see the module docstring).  Raises :class:`~sandbox.executor.ExecutorError`
    only when the baseline cannot be evaluated at all (no GPU, worker unreachable)."""
    run = _Search(
        target,
        proposer,
        executor,
        budget or OptimizeBudget(),
        seed,
        settings or LoopSettings(),
        on_event,
        cancel or threading.Event(),
        trajectory,
    )
    return run.run()


@dataclass(frozen=True)
class _Batch:
    index: int
    proposals: tuple[Proposal, ...]


class _Search:
    """One optimize run in progress: its target, proposer, executor and budget, the batches in
    flight, the attempts so far and the events it reports."""

    def __init__(
        self,
        target: Target,
        proposer: Proposer,
        executor: Executor,
        budget: OptimizeBudget,
        seed: int,
        settings: LoopSettings,
        on_event: EventFn | None,
        cancel: threading.Event,
        trajectory: TrajectoryLog | None,
    ) -> None:
        self.target = target
        self.proposer = proposer
        self.executor = executor
        self.budget = budget
        self.seed = seed
        self.settings = settings
        self.on_event = on_event
        self.user_cancel = cancel
        self.trajectory = trajectory
        rng = random.Random(seed)
        self.seeds = tuple(rng.randrange(1, 2**31) for _ in range(settings.seeds))
        self.run_id = hashlib.sha256(
            f"{target.path}:{target.kernel}:{seed}:{time.time_ns()}".encode()
        ).hexdigest()[:12]
        self.stop = threading.Event()  # set on cancel, deadline, or the end of the run
        self.stopped: Stop | None = None  # why; set once, with ``stop``
        self.start = time.monotonic()
        self.search_start = math.inf  # when the baseline was measured: the wall-time budget starts
        self.queue: queue.Queue[_Batch] = queue.Queue(maxsize=max(1, settings.lookahead))
        self.done = threading.Condition()
        self.batches_done: list[tuple[Attempt, ...]] = []  # guarded by done
        self.submitted = 0  # batches put on the queue; guarded by done
        self.attempts: list[Attempt] = []  # evaluator thread only
        self.seen: dict[str, Attempt] = {}  # proposal fingerprint -> first attempt
        self.best: Attempt | None = None
        self.device: DeviceInfo | None = None
        self.baseline: CandidateResult | None = None
        self.info: RunInfo | None = None

    # ------------------------------------------------------------------ driver

    def run(self) -> OptimizeResult:
        baseline_result = self._evaluate_baseline()
        self.search_start = time.monotonic()
        baseline = baseline_result.baseline
        self.baseline = baseline
        self.device = baseline_result.device
        timed = f"{baseline.timing.median_ms:.4g} ms, " if baseline.timing else ""
        took = f"measured in {self.search_start - self.start:.1f} s"
        self._emit("baseline", f"baseline {baseline.status.value} ({timed}{took})")
        if baseline.status is not Status.OK:
            return self._result(
                RunOutcome.BASELINE_FAILED,
                Stop(StopKind.BASELINE_FAILED, f"{baseline.status.value}: {self.target.located(baseline)}"),
            )
        if self.user_cancel.is_set():
            return self._result(RunOutcome.NOT_IMPROVED, Stop(StopKind.CANCELLED))
        self.info = RunInfo(
            run_id=self.run_id,
            file=self.target.path,
            kernel=self.target.kernel,
            proposer=self.proposer.name,
            seed=self.seed,
            device=self.device.name if self.device else "",
            original=self.target.definition,
            spec=self.target.spec_text,
            baseline_ms=baseline.timing.median_ms if baseline.timing else 0.0,
            simulated=self.device is not None and self.device.simulated,
        )
        context = OptimizeContext(
            self.target, self.device, baseline, self.seed, self.budget, self.stop, self._profile
        )
        watcher = threading.Thread(target=self._watch, name="optimize-watch", daemon=True)
        producer = threading.Thread(
            target=self._produce, args=(context,), name="optimize-propose", daemon=True
        )
        watcher.start()
        producer.start()
        try:
            self._consume()
        finally:
            self._finish(None)
            producer.join(timeout=10)
            watcher.join(timeout=1)
            if producer.is_alive():
                log.warning("the proposer did not stop within 10 s of the end of the run")
        if self.settings.sanitize_winner:
            self._sanitize_winner()
        best = self.best
        improved = best is not None and best.result.speedup_low > 1.0
        assert self.stopped is not None  # every way out of _consume sets it
        self._emit("finished", str(self.stopped))
        return self._result(RunOutcome.IMPROVED if improved else RunOutcome.NOT_IMPROVED, self.stopped)

    def _sanitize_winner(self, tries: int = 3) -> None:
        """Re-run the winner under compute-sanitizer (memcheck, racecheck) before it is reported; a
        rejected winner is recorded and gives way to the next faster one (``tries`` at most).
        Skipped on cancel; not counted in the budget.  Without the tool the sandbox says so in
        ``sanitizer``."""
        ranked = sorted(
            (a for a in self.attempts if a.result.status is Status.OK and not a.duplicate_of),
            key=lambda a: -a.result.speedup,
        )
        self.best = None
        for attempt in ranked:
            if attempt.result.speedup_low <= 1.0 or self.user_cancel.is_set():
                self.best = attempt
                return
            if tries == 0:  # the fastest ones all failed: report none of them
                return
            tries -= 1
            self._emit("evaluating", f"{attempt.candidate_id}: compute-sanitizer")
            candidate, _ = self._candidate(attempt.candidate_id, attempt.proposal)
            assert candidate is not None  # it was evaluated before
            request = replace(
                self._request(f"{self.run_id}-sanitize-{attempt.candidate_id}", (candidate,)),
                options=replace(self.settings.options, sanitize=True, time=False),
            )
            try:
                verdict = self.executor.evaluate(request, cancel=self.user_cancel).candidates[0]
            except ExecutorError as exc:
                log.warning("compute-sanitizer run failed: %s", exc)
                self.best = attempt
                return
            if verdict.status in (Status.OK, Status.CANCELLED):
                self.best = replace(attempt, result=replace(attempt.result, sanitizer=verdict.sanitizer))
                return
            rejected = Attempt(
                len(self.attempts),
                attempt.batch,
                f"{attempt.candidate_id}-sanitized",
                attempt.proposal,
                verdict,
                reward(verdict, self.target.allow_precision),
                attempt.candidate_id,
            )
            self.attempts.append(rejected)
            if self.trajectory is not None and self.info is not None:
                self.trajectory.record(self.info, rejected, retracts=attempt.candidate_id)
            self._emit("evaluated", f"{rejected.candidate_id}: {verdict.status.value} ({verdict.message})")

    def _evaluate_baseline(self) -> EvalResult:
        request = self._request(f"{self.run_id}-baseline", ())
        return self.executor.evaluate(request, progress=self._on_progress, cancel=self.user_cancel)

    def _watch(self) -> None:
        deadline = self.search_start + self.budget.wall_s if self.budget.wall_s else math.inf
        while not self.stop.wait(0.02):
            if self.user_cancel.is_set():
                self._finish(Stop(StopKind.CANCELLED))
            elif time.monotonic() >= deadline:
                self._finish(Stop(StopKind.WALL_TIME))

    def _finish(self, reason: Stop | None) -> None:
        """End the run; the first ``reason`` given stands."""
        with self.done:
            if self.stopped is None:
                self.stopped = reason
            self.stop.set()
            self.done.notify_all()

    # ------------------------------------------------------------------ proposer thread

    def _produce(self, context: OptimizeContext) -> None:
        try:
            reason = self._produce_batches(context)
        except Exception as exc:
            # ours (an unreachable endpoint, a refused key): the one line says it all; a bug: its traceback
            expected = isinstance(exc, CudaAgentError)
            log.warning("proposer %s failed: %s", self.proposer.name, exc, exc_info=not expected)
            reason = Stop(StopKind.PROPOSER_FAILED, str(exc))
        with self.done:  # let the submitted batches finish, then end the run
            while len(self.batches_done) < self.submitted and not self.stop.is_set():
                self.done.wait(0.1)
        self._finish(reason)

    def _produce_batches(self, context: OptimizeContext) -> Stop:
        observed, proposed = 0, 0
        history: list[Attempt] = []
        limit = self.budget.candidates
        while not self.stop.is_set():
            # Deterministic view: before proposing batch k, observe exactly batches < k - lookahead.
            observed = self._observe_until(self.submitted - self.settings.lookahead, observed, history)
            if self.stop.is_set():
                break
            n = self.settings.batch_size if limit is None else min(self.settings.batch_size, limit - proposed)
            proposals = self.proposer.propose(context, tuple(history), n)[:n]
            if proposals:
                self._submit(_Batch(self.submitted, tuple(proposals)))
                proposed += len(proposals)
            if self.budget.tokens is not None and self.proposer.tokens_used >= self.budget.tokens:
                return Stop(StopKind.TOKENS)
            if limit is not None and proposed >= limit:
                return Stop(StopKind.CANDIDATES)
            if not proposals:
                if observed == self.submitted:
                    return Stop(StopKind.PROPOSER_EXHAUSTED)
                observed = self._observe_until(observed + 1, observed, history)
        return Stop(StopKind.CANCELLED)

    def _observe_until(self, upto: int, observed: int, history: list[Attempt]) -> int:
        """Wait until batches < ``upto`` are evaluated, hand the new ones to the proposer."""
        with self.done:
            while len(self.batches_done) < upto and not self.stop.is_set():
                self.done.wait(0.1)
            ready = self.batches_done[observed:upto] if upto > observed else []
        for attempts in ready:
            history.extend(attempts)
            self.proposer.observe(attempts)
        return observed + len(ready)

    def _submit(self, batch: _Batch) -> None:
        while not self.stop.is_set():
            try:
                self.queue.put(batch, timeout=0.1)
            except queue.Full:
                continue
            with self.done:
                self.submitted += 1
            return

    # ------------------------------------------------------------------ evaluator (caller's thread)

    def _consume(self) -> None:
        while not self.stop.is_set():
            try:
                batch = self.queue.get(timeout=0.05)
            except queue.Empty:
                continue
            try:
                attempts = self._evaluate(batch)
            except ExecutorError as exc:
                log.warning("executor failed: %s", exc)
                self._finish(Stop(StopKind.EXECUTOR_FAILED, str(exc)))
                return
            with self.done:
                self.batches_done.append(attempts)
                self.done.notify_all()

    def _evaluate(self, batch: _Batch) -> tuple[Attempt, ...]:
        cids = [f"b{batch.index}-c{i}" for i in range(len(batch.proposals))]
        verdicts: dict[str, CandidateResult] = {}  # decided here or by the executor, by candidate id
        reuse: dict[str, tuple[str, CandidateResult | None]] = {}  # duplicate -> (its original, verdict)
        owners: dict[str, str] = {}  # fingerprint -> candidate id in this batch
        to_run: list[Candidate] = []
        for cid, proposal in zip(cids, batch.proposals, strict=True):
            fp = _fingerprint(proposal)
            if fp in self.seen:
                reuse[cid] = (self.seen[fp].candidate_id, self.seen[fp].result)
            elif fp in owners:
                reuse[cid] = (owners[fp], None)
            else:
                owners[fp] = cid
                candidate, error = self._candidate(cid, proposal)
                if candidate is None:
                    verdicts[cid] = CandidateResult(cid, Status.LAUNCH_ERROR, message=error)
                else:
                    to_run.append(candidate)
        if to_run:
            self._emit("evaluating", f"batch {batch.index}: evaluating {len(to_run)} candidates")
            request = self._request(f"{self.run_id}-b{batch.index}", tuple(to_run))
            result = self.executor.evaluate(request, progress=self._on_progress, cancel=self.stop)
            verdicts.update({r.candidate_id: r for r in result.candidates})
        attempts = []
        for cid, proposal in zip(cids, batch.proposals, strict=True):
            original, earlier = reuse.get(cid, ("", None))
            res = (
                earlier
                or verdicts.get(original or cid)
                or CandidateResult(cid, Status.CANCELLED, "no result")
            )
            attempts.append(
                self._record(batch.index, cid, proposal, replace(res, candidate_id=cid), original)
            )
        return tuple(attempts)

    def _candidate(self, cid: str, proposal: Proposal) -> tuple[Candidate | None, str]:
        return self.target.candidate(cid, proposal)

    def _record(self, batch: int, cid: str, proposal: Proposal, res: CandidateResult, dup: str) -> Attempt:
        attempt = Attempt(
            index=len(self.attempts),
            batch=batch,
            candidate_id=cid,
            proposal=proposal,
            result=res,
            reward=None if res.status is Status.CANCELLED else reward(res, self.target.allow_precision),
            duplicate_of=dup,
        )
        self.attempts.append(attempt)
        if res.status is not Status.CANCELLED:
            self.seen.setdefault(_fingerprint(proposal), attempt)
        if self.trajectory is not None and self.info is not None:
            self.trajectory.record(self.info, attempt)
        if res.status is Status.OK and (self.best is None or res.speedup > self.best.result.speedup):
            self.best = attempt
            self._emit("improved", f"{cid}: {res.speedup:.2f}x ({proposal.description})")
        else:
            self._emit("evaluated", f"{cid}: {res.status.value}")
        return attempt

    def _request(self, request_id: str, candidates: tuple[Candidate, ...]) -> EvalRequest:
        return self.target.request(
            request_id,
            candidates,
            seeds=self.seeds,
            budget=self.settings.eval_budget,
            options=self.settings.options,
        )

    def _profile(self, proposal: Proposal) -> CandidateResult:
        """``proposal`` verified and profiled under Nsight Compute (``EvalOptions.profile``) on the
        bench problem; for a proposer's ``profile`` tool (``OptimizeContext.profile``)."""
        cid = f"profile-{len(self.attempts)}"
        candidate, error = self._candidate(cid, proposal)
        if candidate is None:
            return CandidateResult(cid, Status.LAUNCH_ERROR, message=error)
        options = replace(self.settings.options, profile=True, time=False, sanitize=False)
        request = replace(self._request(f"{self.run_id}-{cid}", (candidate,)), options=options)
        return self.executor.evaluate(request, cancel=self.stop).candidates[0]

    # ------------------------------------------------------------------ events and result

    def _on_progress(self, p: Progress) -> None:
        self._emit("evaluating", p.message or f"{p.done}/{p.total}")

    def _fraction(self) -> float | None:
        shares = []
        if self.budget.wall_s and self.search_start < math.inf:
            shares.append((time.monotonic() - self.search_start) / self.budget.wall_s)
        if self.budget.candidates:
            shares.append(len(self.attempts) / self.budget.candidates)
        if self.budget.tokens:
            shares.append(self.proposer.tokens_used / self.budget.tokens)
        return min(1.0, max(shares)) if shares else None

    def _emit(self, kind: EventKind, message: str) -> None:
        if self.on_event is None:
            return
        best = self.best.result.speedup if self.best else 0.0
        fraction = 1.0 if kind == "finished" else self._fraction()
        try:
            self.on_event(LoopEvent(kind, len(self.attempts), fraction, best, message))
        except Exception:  # a broken progress bar must not end the run
            log.exception("progress callback failed")

    def _result(self, outcome: RunOutcome, stop: Stop) -> OptimizeResult:
        assert self.baseline is not None
        best = self.best
        res = OptimizeResult(
            outcome=outcome,
            stop=stop,
            baseline=self.baseline,
            best=best,
            attempts=len(self.attempts),
            tokens=self.proposer.tokens_used,
            seconds=time.monotonic() - self.start,
            baseline_seconds=min(self.search_start, time.monotonic()) - self.start,
            device=self.device,
            verification=size_checks(best.result) if best else (),
            history=tuple(self.attempts),
            records=tuple(attempt_record(self.target, a) for a in self.attempts),
        )
        if outcome is not RunOutcome.IMPROVED or best is None:
            return res
        change = best.proposal.launch
        launch = self.target.site_edits(change) if change and self.target.site_edits else LaunchEdits()
        edits = launch.edits
        rewritten = self.target.file_with(best.proposal.code, edits)
        name = self.target.path or "kernel.cu"
        old, new = (name, name) if Path(name).is_absolute() else (f"a/{name}", f"b/{name}")
        diff = "".join(
            difflib.unified_diff(
                self.target.text.splitlines(keepends=True),
                rewritten.splitlines(keepends=True),
                fromfile=old,
                tofile=new,
            )
        )
        return replace(
            res,
            rewritten=rewritten,
            diff=diff,
            launch=change,
            launch_edits=edits,
            launch_sites=launch.sites,
            launch_todo=launch.todo,
        )


def _fingerprint(p: Proposal) -> str:
    return hashlib.sha256(
        repr((p.code, p.launch, p.kernel, p.unit, p.options, p.precision)).encode()
    ).hexdigest()
