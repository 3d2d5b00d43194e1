"""Scoring batches of completions through any executor.

:meth:`RewardEngine.score` takes items (``key``, ``task``, ``completion``, optional deadline) and
returns one :class:`Scored` per item, in order.  On the way:

- each completion is parsed (:mod:`learning.completion`); one without code is a failure
  (``verdict: "no_code"``) that never reaches the sandbox; a candidate the task cannot launch
  (another parameter list, a precision the task does not allow it to claim) is refused the way the
  optimize loop refuses it (``launch_error``);
- identical candidates (same task version and normalized source, :func:`~learning.completion.cache_key`)
  are evaluated once: within a batch, across concurrent batches (they wait on the same evaluation)
  and later (an LRU cache of verdicts; ``cached: true``);
- the remaining candidates of one task go to the executor as ONE :class:`~sandbox.contract.EvalRequest`
  (split only past the sandbox's ``max_candidates``); tasks run concurrently up to ``workers``;
  every new PyTorch answer's build starts when its batch arrives (:meth:`Executor.build_ahead`),
  whenever its task's group gets a GPU;
- an ``ok`` candidate whose timing is noisy (:func:`agent.trajectory.noisy`) is timed once more;
  if it is noisy again the reward caps it at "correct";
- deadlines bound reading the completions as well as evaluating them: an item past its own
  deadline or the batch's comes back with ``reward: None`` and the reason (one not read yet is
  not read at all); the evaluation goes on (its verdict is cached for a retry) unless no batch waits
  for it any more, when it is cancelled.

The reward is :func:`agent.trajectory.reward` with the task's allowed precisions.

A PyTorch task's answers (``ModelNew`` modules, :func:`~learning.completion.parse_torch`) are
screened here first (:func:`sandbox.screen.screen`: a refused answer costs no GPU time), then go
to the executor as one :class:`~sandbox.contract.TorchRequest`; their reward is the same function of
the verdict and its speedup against the eager ``Model``; the speedup against ``torch.compile`` is
reported beside it (``compiled_speedup``).
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from agent.trajectory import REWARD_VERSION, Milestone, hack_rule, milestone, noisy, reward
from learning.completion import cache_key, parse, parse_torch, torch_cache_key
from learning.tasks import AnyTask, TaskError, TaskSet, TorchTask
from learning.wire import Item, Scored
from sandbox.contract import (
    Budget,
    Candidate,
    CandidateResult,
    DeviceInfo,
    EvalOptions,
    RequestLimits,
    Status,
    TorchCandidate,
    TorchCandidateResult,
    TorchRequest,
)
from sandbox.executor import Executor, ExecutorError
from sandbox.scheduler import GpuScheduler
from sandbox.screen import screen

log = logging.getLogger(__name__)

MESSAGE_CHARS = 600


@dataclass(frozen=True)
class _Verdict:
    """An evaluation's outcome: the result, or why there is none (``error``)."""

    result: CandidateResult | None
    error: str = ""
    retimed: bool = False
    torch: TorchCandidateResult | None = None  # a PyTorch task's verdict (``result`` is its result)


Verdicts = dict[str, CandidateResult | TorchCandidateResult]


def _plain(r: CandidateResult | TorchCandidateResult) -> CandidateResult:
    return r.result if isinstance(r, TorchCandidateResult) else r


def _verdict(r: CandidateResult | TorchCandidateResult, retimed: bool = False) -> _Verdict:
    return _Verdict(_plain(r), retimed=retimed, torch=r if isinstance(r, TorchCandidateResult) else None)


def _allowed(task: AnyTask) -> tuple[str, ...]:
    return task.allow_precision if isinstance(task, TorchTask) else task.target.allow_precision


class _Group:
    """One task's candidates in flight: a cancel event and how many batches still wait on it."""

    def __init__(self) -> None:
        self.cancel = threading.Event()
        self.waiters = 0


class RewardEngine:
    """Thread-safe; ``close`` stops the evaluation threads."""

    def __init__(
        self,
        executor: Executor,
        tasks: TaskSet,
        *,
        workers: int = 1,
        seeds: tuple[int, ...] = (1, 2, 3),
        budget: Budget | None = None,
        options: EvalOptions | None = None,
        limits: RequestLimits | None = None,
        cache_size: int = 4096,
        torch_compiled: bool = True,
    ) -> None:
        self.executor = executor
        self.tasks = tasks
        self.seeds = seeds
        self.budget = budget or Budget()
        self.options = options or EvalOptions()
        self.limits = limits or RequestLimits()
        self.cache_size = cache_size
        self.torch_compiled = torch_compiled  # PyTorch answers: also timed against torch.compile(Model)
        self._pool = ThreadPoolExecutor(max(1, workers), thread_name_prefix="reward-eval")
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, _Verdict] = OrderedDict()
        self._pending: dict[str, tuple[Future[_Verdict], _Group]] = {}
        self._ids = itertools.count()
        self._started = time.monotonic()
        self._scored: deque[float] = deque(maxlen=100_000)  # when each reward was handed out
        self.counts = {
            "requests": 0,
            "items": 0,
            "evaluated": 0,
            "cache_hits": 0,
            "sandbox_requests": 0,
            "timeouts": 0,
        }
        self.groups_running = 0
        self.groups_queued = 0

    def close(self) -> None:
        with self._lock:
            for _, group in self._pending.values():
                group.cancel.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ---------------------------------------------------------------- scoring

    def score(self, items: Sequence[Item], deadline_s: float | None = None) -> list[Scored]:
        """Score ``items`` (see the module docstring); returns when every item has its reward or
        its deadline has passed."""
        start = time.monotonic()
        batch_end = start + deadline_s if deadline_s is not None else math.inf
        with self._lock:
            self.counts["requests"] += 1
            self.counts["items"] += len(items)
        plans: list[tuple[AnyTask | None, str, Scored | None]] = []  # (task, cache key, decided result)
        fresh: dict[AnyTask, dict[str, Candidate | TorchCandidate]] = {}
        for i, item in enumerate(items):
            now = time.monotonic()
            if now >= min(batch_end, start + item.deadline_s if item.deadline_s is not None else math.inf):
                # reading completions takes time too: past its deadline an item is not read at all
                late = Scored(item.key, item.task, None, reason="deadline: not read in time (retry it)")
                plans.append((None, "", late))
                continue
            try:
                plans.append(self._plan(i, item, fresh))
            except Exception as exc:  # an unreadable completion is that item's verdict, not the batch's
                log.warning("reward item %d: its completion could not be read (%s)", i, type(exc).__name__)
                why = f"no code: the completion could not be read ({type(exc).__name__})"
                plans.append(
                    (
                        None,
                        "",
                        Scored(item.key, item.task, reward(None), Milestone.FAILED, "no_code", message=why),
                    )
                )
        futures = self._submit(fresh, {key for _, key, _ in plans if key})
        waited: set[str] = set()
        out: list[Scored] = []
        try:
            for item, (task, key, decided) in zip(items, plans, strict=True):
                if decided is not None or task is None:
                    out.append(decided or Scored(item.key, item.task, None, reason="no task"))
                    continue
                end = min(batch_end, start + item.deadline_s if item.deadline_s is not None else math.inf)
                out.append(self._await(item, task, key, futures.get(key), end, waited))
        finally:
            self._release(futures)
        with self._lock:
            now = time.monotonic()
            self._scored.extend(now for s in out if s.reward is not None)
        return out

    def _plan(
        self, i: int, item: Item, fresh: dict[AnyTask, dict[str, Candidate | TorchCandidate]]
    ) -> tuple[AnyTask | None, str, Scored | None]:
        try:
            task = self.tasks.resolve(item.task)
        except TaskError as exc:
            return None, "", Scored(item.key, item.task, None, reason=str(exc))
        if isinstance(task, TorchTask):
            return self._plan_torch(item, task, fresh)
        parsed = parse(item.completion, task)
        if parsed.proposal is None:
            return (
                task,
                "",
                Scored(item.key, task.ref, reward(None), Milestone.FAILED, "no_code", message=parsed.no_code),
            )
        key = cache_key(task, parsed.proposal)
        with self._lock:
            if key in self._cache or key in self._pending:
                return task, key, None
        candidate, why = task.target.candidate(f"c{key[:24]}", parsed.proposal)
        if candidate is None:  # refused before it runs, as the optimize loop refuses it
            result = CandidateResult(f"c{key[:24]}", Status.LAUNCH_ERROR, why)
            with self._lock:
                self._store(key, _Verdict(result))
            return task, key, None
        fresh.setdefault(task, {})[key] = candidate
        return task, key, None

    def _plan_torch(
        self, item: Item, task: TorchTask, fresh: dict[AnyTask, dict[str, Candidate | TorchCandidate]]
    ) -> tuple[AnyTask | None, str, Scored | None]:
        parsed = parse_torch(item.completion)
        if not parsed.source:
            return (
                task,
                "",
                Scored(item.key, task.ref, reward(None), Milestone.FAILED, "no_code", message=parsed.no_code),
            )
        key = torch_cache_key(task, parsed.source)
        with self._lock:
            if key in self._cache or key in self._pending:
                return task, key, None
        status, why = screen(parsed.source)
        if status is not None:  # refused before any GPU time is spent (the sandbox screens it again)
            with self._lock:
                self._store(key, _Verdict(CandidateResult(f"c{key[:24]}", status, why)))
            return task, key, None
        fresh.setdefault(task, {})[key] = TorchCandidate(f"c{key[:24]}", parsed.source)
        return task, key, None

    def _submit(
        self, fresh: dict[AnyTask, dict[str, Candidate | TorchCandidate]], keys: set[str]
    ) -> dict[str, tuple[Future[_Verdict], _Group]]:
        """The pending evaluation of each of ``keys`` that has no verdict yet: new candidates are
        grouped per task and submitted, candidates another batch is evaluating are shared."""
        joined: dict[str, tuple[Future[_Verdict], _Group]] = {}
        # PyTorch answers' builds start now, before any group is queued, not when their group runs
        ahead = [
            c.source for cands in fresh.values() for c in cands.values() if isinstance(c, TorchCandidate)
        ]
        if ahead:
            try:
                self.executor.build_ahead(ahead)
            except ExecutorError as exc:  # each evaluation meets it and reports it
                log.warning("PyTorch answers could not be built ahead: %s", exc)
        with self._lock:
            for task, candidates in fresh.items():
                group = _Group()
                mine: dict[str, Future[_Verdict]] = {}
                for key in candidates:
                    if key in self._pending or key in self._cache:  # another batch got there first
                        continue
                    mine[key] = Future()
                    self._pending[key] = (mine[key], group)
                if mine:
                    cands = [candidates[k] for k in mine]
                    self.groups_queued += 1
                    self._pool.submit(self._run_group, task, cands, mine, group)
            for key in keys:
                if key in self._pending:
                    joined[key] = self._pending[key]
                    joined[key][1].waiters += 1
        return joined

    def _release(self, futures: dict[str, tuple[Future[_Verdict], _Group]]) -> None:
        with self._lock:
            for future, group in futures.values():
                group.waiters -= 1
                if group.waiters <= 0 and not future.done():
                    group.cancel.set()  # nobody waits for it any more

    def _await(
        self,
        item: Item,
        task: AnyTask,
        key: str,
        entry: tuple[Future[_Verdict], _Group] | None,
        end: float,
        waited: set[str],
    ) -> Scored:
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
        first = key not in waited
        waited.add(key)
        if cached is not None and entry is None:
            with self._lock:
                self.counts["cache_hits"] += 1
            return self._scored_from(item, task, cached, cached=True)
        if entry is None:  # pending when planned, finished and evicted since: should not happen
            return Scored(item.key, task.ref, None, reason="internal: the verdict was lost")
        try:
            verdict = entry[0].result(timeout=max(0.0, end - time.monotonic()) if end < math.inf else None)
        except FutureTimeout:
            with self._lock:
                self.counts["timeouts"] += 1
            return Scored(
                item.key,
                task.ref,
                None,
                reason="deadline: no verdict in time (still evaluating: retry for the cached result)",
            )
        return self._scored_from(item, task, verdict, cached=not first)

    def _scored_from(self, item: Item, task: AnyTask, verdict: _Verdict, cached: bool) -> Scored:
        r = verdict.result
        if r is None:
            return Scored(item.key, task.ref, None, cached=cached, reason=verdict.error)
        if r.status is Status.CANCELLED:
            return Scored(item.key, task.ref, None, verdict=r.status.value, reason=f"cancelled: {r.message}")
        allowed = _allowed(task)
        compiled = verdict.torch
        return Scored(
            key=item.key,
            task=task.ref,
            reward=reward(r, allowed),
            milestone=milestone(r, allowed),
            verdict=r.status.value,
            rule=hack_rule(r, allowed),
            speedup=r.speedup,
            speedup_low=r.speedup_low,
            speedup_high=r.speedup_high,
            pairs=r.pairs,
            noisy=noisy(r),
            retimed=verdict.retimed,
            cached=cached,
            message=r.message[:MESSAGE_CHARS],
            compiled_speedup=compiled.compiled_speedup if compiled else 0.0,
            compiled_speedup_low=compiled.compiled_speedup_low if compiled else 0.0,
            footprint_bytes=compiled.footprint_bytes if compiled else 0,
            peak_memory_bytes=compiled.peak_memory_bytes if compiled else 0,
            phases=dict(compiled.phases) if compiled else {},
        )

    # ---------------------------------------------------------------- evaluation threads

    def _run_group(
        self,
        task: AnyTask,
        cands: list[Candidate | TorchCandidate],
        futures: dict[str, Future[_Verdict]],
        group: _Group,
    ) -> None:
        with self._lock:
            self.groups_queued -= 1
            self.groups_running += 1
        verdicts: dict[str, _Verdict] = {}
        try:
            by_id = {c.id: key for key, c in zip(futures, cands, strict=True)}
            results = self._evaluate(task, cands, group)
            if isinstance(results, str):
                verdicts = {key: _Verdict(None, results) for key in futures}
            else:
                shaky = [c for c in cands if (r := results.get(c.id)) is not None and noisy(_plain(r))]
                again = self._evaluate(task, shaky, group, "retime") if shaky else {}
                for cid, key in by_id.items():
                    if (
                        isinstance(again, dict)
                        and cid in again
                        and _plain(again[cid]).status is not Status.CANCELLED
                    ):
                        verdicts[key] = _verdict(again[cid], retimed=True)
                    elif cid in results:
                        verdicts[key] = _verdict(results[cid])
                    else:
                        verdicts[key] = _Verdict(None, "the sandbox returned no verdict")
        except Exception as exc:  # never leave a waiter hanging
            log.exception("reward evaluation of %s failed", task.ref)
            verdicts = {
                key: _Verdict(None, f"internal error: {type(exc).__name__}: {exc}") for key in futures
            }
        finally:
            with self._lock:
                self.groups_running -= 1
                for key, future in futures.items():
                    verdict = verdicts.get(key) or _Verdict(None, "not evaluated")
                    self._pending.pop(key, None)
                    keep = verdict.result is not None and verdict.result.status is not Status.CANCELLED
                    if keep:
                        self._store(key, verdict)
                        self.counts["evaluated"] += 1
                    future.set_result(verdict)

    def _evaluate(
        self, task: AnyTask, cands: list[Candidate | TorchCandidate], group: _Group, tag: str = ""
    ) -> Verdicts | str:
        """Verdicts by candidate id, or why there are none (the task's baseline failed, the
        executor is down)."""
        out: Verdicts = {}
        step = max(1, self.limits.max_candidates)
        for i in range(0, len(cands), step):
            rid = f"reward-{next(self._ids)}-{task.name[:60]}" + (f"-{tag}" if tag else "")
            part = cands[i : i + step]
            if isinstance(task, TorchTask):
                why = self._evaluate_torch(
                    task, rid, [c for c in part if isinstance(c, TorchCandidate)], group, out
                )
                if why:
                    return why
                continue
            request = task.target.request(
                rid,
                tuple(c for c in part if isinstance(c, Candidate)),
                seeds=self.seeds,
                budget=self.budget,
                options=self.options,
            )
            with self._lock:
                self.counts["sandbox_requests"] += 1
            try:
                result = self.executor.evaluate(request, cancel=group.cancel)
            except ExecutorError as exc:
                return f"sandbox unavailable: {exc}"
            if result.baseline.status is not Status.OK:
                return f"the task's own kernel failed on this device ({result.baseline.status.value}: {result.baseline.message[:200]})"
            out.update({r.candidate_id: r for r in result.candidates})
        return out

    def _evaluate_torch(
        self, task: TorchTask, rid: str, cands: list[TorchCandidate], group: _Group, out: Verdicts
    ) -> str:
        """One :class:`TorchRequest`: its verdicts into ``out``, or why there are none."""
        request = TorchRequest(
            rid,
            task.text,
            tuple(cands),
            seeds=self.seeds,
            budget=self.budget,
            time=self.options.time,
            compiled=self.torch_compiled,
        )
        with self._lock:
            self.counts["sandbox_requests"] += 1
        try:
            result = self.executor.evaluate_torch(request, cancel=group.cancel)
        except ExecutorError as exc:
            return f"sandbox unavailable: {exc}"
        failed = next((r.task_error for r in result.candidates if r.task_error), "")
        if failed:
            return f"the task's own model failed on this device ({failed[:200]})"
        out.update({r.result.candidate_id: r for r in result.candidates})
        return ""

    def _store(self, key: str, verdict: _Verdict) -> None:
        """Cache a verdict (lock held)."""
        self._cache[key] = verdict
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    # ---------------------------------------------------------------- stats

    def stats(self) -> dict[str, Any]:
        now = time.monotonic()
        with self._lock:
            recent = sum(1 for t in self._scored if now - t <= 60.0)
            uptime = now - self._started
            return {
                **self.counts,
                "rewards_per_s": recent / min(60.0, max(uptime, 1e-9)),
                "uptime_s": uptime,
                "queue": self.groups_queued,
                "running": self.groups_running,
                "cache_entries": len(self._cache),
                "reward_version": REWARD_VERSION,
                "gpus": self._gpu_load(),
            }

    def _gpu_load(self) -> list[dict[str, Any]]:
        """Requests queued or running per GPU (a scheduler's lanes; one entry for any other executor)."""
        if isinstance(self.executor, GpuScheduler):
            return [
                {"gpu": lane.label, "queued": lane.queued, "failure": lane.failure}
                for lane in self.executor.lanes
            ]
        return [{"gpu": "executor", "queued": self.groups_running, "failure": ""}]

    def devices(self) -> list[DeviceInfo]:
        try:
            return [self.executor.device_info()]
        except ExecutorError:
            return []
