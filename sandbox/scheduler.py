"""Many GPUs behind one :class:`~sandbox.executor.Executor`: one lane per GPU, kernels pinned to lanes.

:class:`GpuScheduler` takes one executor per GPU (a :class:`~sandbox.local.LocalExecutor` on one
device, a Ray actor holding one GPU, a fake in tests) and runs at most one request per GPU at a
time.  The rules:

- **A request never leaves its GPU.**  An :class:`EvalRequest` (baseline and candidates) goes whole
  to one lane, so every speedup in its result is a ratio of two timings on the same GPU.
- **A kernel stays on its GPU.**  Requests that share a baseline, problems and seeds (every batch
  of one optimize run, its compute-sanitizer re-check) go to the lane the first one went to, so a
  run's candidates are compared on one device and the worker keeps its inputs and reference
  outputs between batches.  A :meth:`GpuScheduler.session` pins explicitly: every request made
  through it goes to one lane, chosen when the session opens (the suite opens one per kernel).
- **New work goes to the least loaded GPU**: the fewest open sessions and recently used kernels,
  then the fewest requests queued or running, then the lowest position.
- **A GPU that fails** (its executor raises :class:`~sandbox.executor.ExecutorError`: the device
  disappeared, the Ray actor died) is taken out of the rotation; the request it held is run again,
  whole, on another GPU (once), and the kernels pinned to it move.  When the retry fails too, every
  candidate of the request comes back ``crash`` with both GPUs and their errors in the message.
  Only when no GPU is left does :meth:`GpuScheduler.evaluate` raise: :class:`NoGpuError` when
  every GPU failed for want of a GPU, else :class:`WorkerUnavailable`, naming each GPU and why.

Results say which GPU measured them: ``EvalResult.device.index`` is the lane's GPU index.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from base.errors import InputError
from sandbox.contract import (
    CandidateResult,
    DeviceInfo,
    EvalRequest,
    EvalResult,
    Status,
    TorchRequest,
    TorchResult,
    to_json,
)
from sandbox.executor import Executor, ExecutorError, NoGpuError, ProgressFn, WorkerUnavailable

log = logging.getLogger(__name__)

LINGER_S = 5.0  # a kernel counts towards its GPU's load this long after its last request
MAX_KEYS = 4096  # kernels remembered for affinity (least recently used forgotten first)
WAIT_POLL_S = 0.05  # how often a request waiting for its GPU looks at its cancel event


@dataclass
class Lane:
    """One GPU: its executor, where results are stamped from, and its state (scheduler's lock)."""

    executor: Executor
    index: int  # the GPU's index, stamped on results (``DeviceInfo.index``)
    label: str = ""  # how messages name it ("GPU 1"; a Ray lane adds its node)
    busy: threading.Lock = field(default_factory=threading.Lock)  # one request at a time
    queued: int = 0  # requests waiting for or running on this lane
    failure: str = ""  # why the lane was taken out of rotation ("" while it serves)
    no_gpu: bool = False  # it failed for want of a GPU (NoGpuError), not a broken worker

    def __post_init__(self) -> None:
        self.label = self.label or f"GPU {self.index}"


def affinity_key(request: EvalRequest) -> str:
    """What pins a request to a GPU: the kernel it is compared against and how (baseline,
    problems, seeds).  Every batch of one optimize run shares it."""
    parts = (request.baseline, request.verify_problems, request.bench_problem, request.seeds)
    return hashlib.sha256(to_json(parts).encode()).hexdigest()


def failed_result(request: EvalRequest, message: str) -> EvalResult:
    """Every kernel of ``request`` reported ``crash`` with ``message`` (the infrastructure failed)."""

    def failed(cid: str) -> CandidateResult:
        return CandidateResult(candidate_id=cid, status=Status.CRASH, message=message)

    return EvalResult(request.id, failed("baseline"), tuple(failed(c.id) for c in request.candidates))


class GpuScheduler(Executor):
    """One lane per GPU (see the module docstring).  Thread-safe; closing it closes the lanes."""

    def __init__(self, lanes: Sequence[Lane], *, linger_s: float = LINGER_S) -> None:
        if not lanes:
            raise ValueError("a scheduler needs at least one GPU")
        self.lanes = list(lanes)
        self.linger_s = linger_s
        self._lock = threading.Lock()
        self._pins: OrderedDict[str, int] = OrderedDict()  # key -> lane position
        self._last: dict[str, float] = {}  # implicit key -> when it was last used (monotonic)
        self._sessions: dict[str, int] = {}  # open session key -> lane position
        self._running: dict[str, int] = {}  # key -> requests in flight
        self._ids = itertools.count()

    # ------------------------------------------------------------------ Executor

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        return self._evaluate(affinity_key(request), request, progress, cancel)

    def evaluate_torch(self, request: TorchRequest, *, cancel: threading.Event | None = None) -> TorchResult:
        """On the least loaded GPU in service (its executor runs one evaluation at a time)."""
        with self._lock:
            lane = self.lanes[self._least_loaded()]
        return lane.executor.evaluate_torch(request, cancel=cancel)

    def build_ahead(self, sources: Sequence[str]) -> None:
        """On every GPU in service (their executors share one build pool: one build per source
        and arch)."""
        with self._lock:
            lanes = self._live()
        for lane in lanes:
            lane.executor.build_ahead(sources)

    def device_info(self) -> DeviceInfo:
        """The first GPU in service (sessions: their own GPU)."""
        lane = self._live()[0]
        return replace(lane.executor.device_info(), index=lane.index)

    def _info(self, key: str) -> DeviceInfo:
        with self._lock:
            lane = self.lanes[self._place(key)]
        return replace(lane.executor.device_info(), index=lane.index)

    def gpu_count(self) -> int:
        with self._lock:
            return sum(not lane.failure for lane in self.lanes)

    def session(self) -> Session:
        """An executor whose requests all go to one GPU, chosen now (moved only if it fails)."""
        key = f"session-{next(self._ids)}"
        with self._lock:
            self._sessions[key] = self._least_loaded()
        return Session(
            lambda r, p, c: self._evaluate(key, r, p, c), lambda: self._info(key), lambda: self._end(key)
        )

    def close(self) -> None:
        for lane in self.lanes:
            lane.executor.close()

    # ------------------------------------------------------------------ placement

    def _live(self) -> list[Lane]:
        live = [lane for lane in self.lanes if not lane.failure]
        if not live:
            why = "; ".join(f"{lane.label}: {lane.failure}" for lane in self.lanes)
            if all(lane.no_gpu for lane in self.lanes):
                raise NoGpuError(why)
            raise WorkerUnavailable(f"every GPU failed: {why}")
        return live

    def _load(self, position: int, now: float) -> tuple[int, int, int]:
        sessions = sum(p == position for p in self._sessions.values())
        recent = sum(
            p == position and (self._running.get(k, 0) or now - self._last.get(k, -1e9) < self.linger_s)
            for k, p in self._pins.items()
        )
        return sessions + recent, self.lanes[position].queued, position

    def _place(self, key: str) -> int:
        """The lane position for ``key`` (scheduler lock held): its pin if that lane serves, else
        the least loaded live lane, which becomes its pin."""
        pinned = self._sessions.get(key, self._pins.get(key))
        if pinned is not None and not self.lanes[pinned].failure:
            if key in self._pins:
                self._pins.move_to_end(key)
            return pinned
        best = self._least_loaded()
        if key in self._sessions:
            self._sessions[key] = best
        else:
            self._pins[key] = best
            while len(self._pins) > MAX_KEYS:
                old, _ = self._pins.popitem(last=False)
                self._last.pop(old, None)
        return best

    def _least_loaded(self) -> int:
        now = time.monotonic()
        return min((self.lanes.index(lane) for lane in self._live()), key=lambda p: self._load(p, now))

    def _end(self, key: str) -> None:
        with self._lock:
            self._sessions.pop(key, None)

    # ------------------------------------------------------------------ running

    def _evaluate(
        self,
        key: str,
        request: EvalRequest,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
    ) -> EvalResult:
        failures: list[str] = []
        with self._lock:
            self._running[key] = self._running.get(key, 0) + 1
        try:
            while True:
                with self._lock:
                    lane = self.lanes[self._place(key)]
                    lane.queued += 1
                try:
                    result = self._run_on(lane, request, progress, cancel)
                    if result is not None:
                        return result
                except ExecutorError as exc:
                    failures.append(f"{lane.label} failed: {exc}")
                    self._fail(lane, str(exc), isinstance(exc, NoGpuError))
                    if len(failures) == 2:  # run again once, then report (or raise: no GPU left)
                        with self._lock:
                            self._live()
                        log.warning("request %s: %s", request.id, "; ".join(failures))
                        return failed_result(request, "; requeued, ".join(failures))
                    log.warning("request %s: %s; running it again on another GPU", request.id, failures[0])
                finally:
                    with self._lock:
                        lane.queued -= 1
        finally:
            with self._lock:
                self._running[key] -= 1
                if not self._running[key]:
                    del self._running[key]
                if key in self._pins:
                    self._last[key] = time.monotonic()

    def _run_on(
        self,
        lane: Lane,
        request: EvalRequest,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
    ) -> EvalResult | None:
        """The result of ``request`` on ``lane``; None when the lane failed while it waited."""
        while not lane.busy.acquire(timeout=WAIT_POLL_S):
            if cancel is not None and cancel.is_set():
                return _cancelled(request)
        try:
            if lane.failure:  # it failed (another request found out) while this one waited
                return None
            result = lane.executor.evaluate(request, progress=progress, cancel=cancel)
        finally:
            lane.busy.release()
        if result.device is not None:
            result = replace(result, device=replace(result.device, index=lane.index))
        return result

    def _fail(self, lane: Lane, why: str, no_gpu: bool = False) -> None:
        with self._lock:
            if not lane.failure:
                lane.failure, lane.no_gpu = why or "failed", no_gpu
                log.warning("%s taken out of rotation: %s", lane.label, lane.failure)


def _cancelled(request: EvalRequest) -> EvalResult:
    def cancelled(cid: str) -> CandidateResult:
        return CandidateResult(cid, Status.CANCELLED, "cancelled while waiting for a GPU")

    return EvalResult(request.id, cancelled("baseline"), tuple(cancelled(c.id) for c in request.candidates))


class Session(Executor):
    """Requests through one pinned route, and the GPUs that answered them (``gpus``)."""

    def __init__(
        self,
        run: Callable[[EvalRequest, ProgressFn | None, threading.Event | None], EvalResult],
        info: Callable[[], DeviceInfo],
        end: Callable[[], None] = lambda: None,
    ) -> None:
        self._run, self._info, self._end = run, info, end
        self._gpus: dict[int, None] = {}  # in order of first use
        self._lock = threading.Lock()

    @property
    def gpus(self) -> tuple[int, ...]:
        with self._lock:
            return tuple(self._gpus)

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        result = self._run(request, progress, cancel)
        if result.device is not None:
            with self._lock:
                self._gpus.setdefault(result.device.index)
        return result

    def device_info(self) -> DeviceInfo:
        return self._info()

    def close(self) -> None:
        self._end()


def session(executor: Executor) -> Session:
    """A session of ``executor``: pinned to one GPU on a :class:`GpuScheduler`; any other
    executor is used as it is, and the session only records the GPUs of its results."""
    if isinstance(executor, GpuScheduler):
        return executor.session()
    return Session(lambda r, p, c: executor.evaluate(r, progress=p, cancel=c), executor.device_info)


def gpu_count(executor: Executor) -> int:
    """How many requests ``executor`` runs at once (its GPUs in service)."""
    return executor.gpu_count() if isinstance(executor, GpuScheduler) else 1


def local_scheduler(devices: Iterable[int], make: Callable[[int], Executor]) -> GpuScheduler:
    """A scheduler over ``make(device)`` for each device (e.g. a one-GPU ``LocalExecutor``)."""
    lanes: list[Lane] = []
    try:
        for d in dict.fromkeys(devices):
            lanes.append(Lane(make(d), d))
    except BaseException:
        for lane in lanes:
            lane.executor.close()
        raise
    return GpuScheduler(lanes)


class GpuListError(InputError):
    """A list of GPU indices (``--gpus``) does not parse."""


def parse_gpus(text: str) -> tuple[int, ...]:
    """``0,1,3`` -> (0, 1, 3); ``all`` -> every visible GPU.  :class:`GpuListError` with the reason otherwise."""
    if text.strip() == "all":
        return visible_gpus()
    try:
        gpus = tuple(int(g) for g in text.split(","))
    except ValueError:
        raise GpuListError("expected comma-separated GPU indices such as 0,1, or all") from None
    if any(g < 0 for g in gpus):
        raise GpuListError("GPU indices are 0 or more")
    if len(set(gpus)) != len(gpus):
        raise GpuListError("a GPU is listed twice")
    return gpus


_COUNT_GPUS = (
    "from cuda.bindings import driver as d\n"
    "assert d.cuInit(0)[0] == d.CUresult.CUDA_SUCCESS\n"
    "err, n = d.cuDeviceGetCount()\n"
    "print(n if err == d.CUresult.CUDA_SUCCESS else 0)\n"
)


def visible_gpus() -> tuple[int, ...]:
    """The GPUs this process may use (``CUDA_VISIBLE_DEVICES`` honoured), counted by the CUDA
    driver in a short-lived child process, so the caller never initialises CUDA; (0,) when none
    can be counted (the executor then says why there is no GPU)."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", _COUNT_GPUS], capture_output=True, text=True, timeout=60, env=os.environ
        )
        n = int(out.stdout.strip() or 0) if out.returncode == 0 else 0
    except (OSError, ValueError, subprocess.TimeoutExpired):
        n = 0
    return tuple(range(n)) or (0,)
