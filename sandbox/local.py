"""LocalExecutor: evaluate requests on this machine's GPUs, one worker process per device.

Parent side: compiles baseline and candidates in :class:`sandbox.compile_pool.CompilePool` (CPU
processes, overlapping GPU work), rejects what can be rejected statically, and sends each candidate
to its GPU worker (:class:`sandbox.process.WorkerProcess`, serving
:class:`sandbox.gpu_handler.GpuHandler`) with a deadline; ``ok`` candidates are re-run under
compute-sanitizer and Nsight Compute when asked (:mod:`sandbox.instrumented`).

PyTorch (KernelBench-format) answers are Python: :meth:`LocalExecutor.evaluate_torch` runs each
in a fresh worker process of its own with ``sandbox.torch_eval:TorchHandler`` (same prefix,
environment, wire and deadline; the process is closed after its one job).

The handler is pluggable (``handler="module:factory"``) so lifecycle tests can run workers that
crash or hang without a GPU.
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from sandbox.compile_pool import CompilePool
from sandbox.confine import CompileLimits
from sandbox.contract import (
    Budget,
    CandidateResult,
    DeviceInfo,
    EvalRequest,
    EvalResult,
    KernelSource,
    Problem,
    Progress,
    RequestError,
    RequestLimits,
    Status,
    TorchCandidateResult,
    TorchRequest,
    TorchResult,
    lowered_constants,
    validate_request,
    validate_torch_request,
)
from sandbox.executor import Executor, ExecutorError, NoGpuError, ProgressFn, WorkerUnavailable
from sandbox.instrumented import nsight_profile, sanitize
from sandbox.isolation import bwrap_prefix
from sandbox.process import CANCEL_POLL_S, WorkerProcess
from sandbox.timing import cached_ceilings, physics_floor, store_ceilings, with_throughput
from sandbox.torch_build import BUILD_WORKERS, BuildPool, spawn_builder
from sandbox.torch_eval import BUILD_ALLOWANCE_S, TORCH_HANDLER
from sandbox.verify import static_rejection
from sandbox.wire import DEFAULT_HANDLER, Binary, EvalJob, InfoJob, Reply, TorchJob

UNSAFE_TORCH_ENV = "CUDA_AGENT_UNSAFE_TORCH"  # "1": PyTorch answers run even without bubblewrap
SPARE_START_S = 120.0  # a PyTorch worker's start (importing torch, the device's context), ahead of its job
AHEAD = 2  # PyTorch worker processes started ahead of their turn, per device (each holds a CUDA context)


class LocalExecutor(Executor):
    """Evaluates on this machine's GPUs: one worker process per device, one request per worker.
    ``limits``: what one request may ask for (:func:`~sandbox.contract.validate_request`);
    ``compile_limits``: what one compile may use (:class:`~sandbox.confine.CompileLimits`)."""

    def __init__(
        self,
        devices: Sequence[int] = (0,),
        *,
        backend: str = "cupy",
        handler: str = DEFAULT_HANDLER,
        sandbox: bool = True,
        compile_workers: int | None = None,
        limits: RequestLimits | None = None,
        compile_limits: CompileLimits | None = None,
        torch_handler: str = TORCH_HANDLER,
        builds: BuildPool | None = None,
    ) -> None:
        self.torch_handler = torch_handler
        self.limits = limits or RequestLimits()

        prefix = bwrap_prefix() if sandbox else ()
        self.sandboxed = bool(prefix)
        self._workers = [WorkerProcess(d, backend, handler, prefix) for d in devices]
        self._idle: queue.Queue[WorkerProcess] = queue.Queue()
        for w in self._workers:
            self._idle.put(w)
        self._pool = CompilePool(compile_workers, sandbox=sandbox, limits=compile_limits)
        # PyTorch answers' extensions: built where answers run (the GPU workers' prefix), ahead of
        # timing; ``builds``: one pool shared by the host's GPUs (sandbox.executors), closed with the process
        self._own_builds = builds is None
        self.builds = builds or BuildPool(spawn_builder(prefix), workers=BUILD_WORKERS)
        self._info: dict[int, DeviceInfo] = {}
        self._info_lock = threading.Lock()
        # PyTorch workers' processes started ahead of their turn on the device (LocalExecutor._spare)
        self._starters = concurrent.futures.ThreadPoolExecutor(AHEAD * len(self._workers), "torch-spare")
        self._ahead = threading.BoundedSemaphore(AHEAD * len(self._workers))

    def device_info(self) -> DeviceInfo:
        known = self._info.get(self._workers[0].device)
        if known is not None:  # no need to wait for a worker that may be busy evaluating
            return known
        worker = self._idle.get()
        try:
            return self._device_info(worker)
        finally:
            self._idle.put(worker)

    def _device_info(self, worker: WorkerProcess) -> DeviceInfo:
        with self._info_lock:
            if worker.device in self._info:
                return self._info[worker.device]
            if worker.proc is None:
                worker.start()
            bare = self._ask_info(worker, None, 60.0)
            known = cached_ceilings(bare)
            info = known or self._ask_info(worker, bare, 120.0)
            if known is None:
                store_ceilings(info)
            self._info[worker.device] = info
            return info

    @staticmethod
    def _ask_info(worker: WorkerProcess, bare: DeviceInfo | None, timeout: float) -> DeviceInfo:
        reply = worker.call(InfoJob(known=None if bare is None else bare), timeout)
        if reply.unavailable:
            raise NoGpuError(reply.unavailable)
        if not isinstance(reply.value, DeviceInfo):
            raise WorkerUnavailable(f"GPU worker {worker.device} did not describe its device")
        return reply.value

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        try:
            validate_request(request, self.limits)
        except RequestError as exc:
            raise ExecutorError(f"request {request.id[:200]!r} refused: {exc}") from exc
        worker = self._idle.get()
        try:
            if worker.backend != request.options.backend:
                worker.kill()
                worker.backend = request.options.backend
            info = self._device_info(worker)
            parts = [
                _Evaluation(self, worker, info, part, progress, cancel).run()
                for part in split_by_defines(request)
            ]
            return merge_parts(request, parts)
        finally:
            self._idle.put(worker)

    def evaluate_torch(self, request: TorchRequest, *, cancel: threading.Event | None = None) -> TorchResult:
        """Each candidate in a fresh PyTorch worker process (``sandbox.torch_eval``) with the GPU
        workers' isolation, while this executor's GPU worker for the device stays idle.

        Candidates run in the order their builds end (:class:`BuildPool`; a Triton answer's is
        at once), each holding the device for its own evaluation only, so other requests' built
        answers run while this one's build; an answer's process is started (torch imported, no
        answer code run) while the answer before it runs or while it waits for the device
        (:meth:`_ahead_of_turn`, at most :data:`AHEAD` per device).  Each
        verdict's ``phases`` gains the executor's: ``build_wait_s``, ``build_s``, ``queue_s`` (the
        device busy with other requests), ``spawn_s`` and ``worker_s``."""
        try:
            validate_torch_request(request, self.limits)
        except RequestError as exc:
            raise ExecutorError(f"request {request.id[:200]!r} refused: {exc}") from exc
        if not self.sandboxed and os.environ.get(UNSAFE_TORCH_ENV) != "1":
            # A ModelNew is untrusted Python (and whatever C++ it builds): unlike a CUDA kernel it
            # runs on the host, so it runs only where the worker is inside bubblewrap.
            raise ExecutorError(
                "PyTorch answers run only inside bubblewrap, which is not usable here; on a machine "
                f"that holds nothing to protect, {UNSAFE_TORCH_ENV}=1 runs them without it"
            )
        arch = self.device_info().compute_capability  # the arch list every build is for
        deadline = time.monotonic() + self.builds.wall_s  # queueing included
        # every candidate builds while the GPU times others (this request's and other requests');
        # one submitted ahead (build_ahead) is that build
        futures = [self.builds.submit(c.source, arch, deadline) for c in request.candidates]
        builds = dict(enumerate(futures))  # not built yet
        timeout = request.budget.timeout_s + BUILD_ALLOWANCE_S
        results: dict[int, TorchCandidateResult] = {}
        ready: list[int] = []  # built, in the order their builds ended
        first = self._workers[0]  # where processes start ahead (an executor per GPU: its GPU)
        spare: tuple[int, _Started] | None = None  # the next answer's process, started ahead
        idle = 0.0  # seconds this request waited for a build since its last evaluation
        try:
            while builds or ready:
                if cancel is not None and cancel.is_set():
                    break
                done = sorted(i for i, b in builds.items() if b.done())
                ready += done
                for i in done:
                    del builds[i]
                if not ready:
                    waited = time.perf_counter()
                    concurrent.futures.wait(
                        list(builds.values()),
                        timeout=CANCEL_POLL_S,
                        return_when=concurrent.futures.FIRST_COMPLETED,
                    )
                    idle += time.perf_counter() - waited
                    continue
                index = ready.pop(0)
                cand = request.candidates[index]
                built = futures[index].result()
                phases = {"build_wait_s": idle} | ({} if built.cached else {"build_s": built.seconds})
                idle = 0.0
                if built.verdict is not None:  # decided by its build: no GPU time
                    result = CandidateResult(cand.id, built.verdict, built.message, seconds=built.seconds)
                    results[index] = TorchCandidateResult(result, phases=phases)
                    continue
                started: _Started | None = None
                if spare is not None and spare[0] == index:
                    started, spare = spare[1], None
                else:  # its process starts now, while it waits for the device (if few are ahead)
                    started = self._ahead_of_turn(cand.source, arch)
                queued = time.perf_counter()
                worker = self._idle.get()  # the device, for this answer only: others' answers interleave
                phases["queue_s"] = time.perf_counter() - queued
                try:
                    directory = self.builds.directory(cand.source, arch)
                    job = TorchJob(request, index, directory, arch, self._device_info(worker))
                    if started is not None and worker.device != first.device:  # for another device
                        started.close()
                        started = None
                    started = started or self._spare(worker, cand.source, arch)
                    # the next answer to run's process starts while this one runs
                    after = next((i for i in ready if futures[i].result().verdict is None), None)
                    ahead = (
                        None if after is None else self._ahead_of_turn(request.candidates[after].source, arch)
                    )
                    spare = None if after is None or ahead is None else (after, ahead)
                    results[index] = self._run_torch(started, job, timeout, cancel, phases)
                except BaseException:
                    if started is not None:  # (closing one its job took and closed is harmless)
                        started.close()
                    raise
                finally:
                    self._idle.put(worker)
        finally:
            if spare is not None:
                spare[1].close()
        cancelled = [
            TorchCandidateResult(CandidateResult(c.id, Status.CANCELLED)) for c in request.candidates
        ]
        return TorchResult(
            request.id, tuple(results.get(i, cancelled[i]) for i in range(len(cancelled))), self.device_info()
        )

    def _run_torch(
        self,
        started: _Started,
        job: TorchJob,
        timeout: float,
        cancel: threading.Event | None,
        phases: dict[str, float],
    ) -> TorchCandidateResult:
        """``job`` in its process (``started``: :meth:`_spare`), closed after its one job;
        ``phases``: the executor's seconds, added to the worker's."""
        waited = time.perf_counter()
        proc = started.take()
        phases["spawn_s"] = time.perf_counter() - waited  # what its start did not hide
        called = time.perf_counter()
        try:
            reply = proc.call(job, timeout, cancel)
        finally:
            proc.close()
        phases["worker_s"] = time.perf_counter() - called
        if reply.unavailable:
            raise NoGpuError(f"PyTorch worker: {reply.unavailable}")
        if not isinstance(reply.value, TorchCandidateResult):  # a reply decode_reply let through
            raise WorkerUnavailable("the PyTorch worker sent no verdict")
        return replace(reply.value, phases={**reply.value.phases, **phases})

    def build_ahead(self, sources: Sequence[str]) -> None:
        """Submit the builds of PyTorch answers ``sources`` now (:class:`BuildPool`: bounded by
        its workers, one build per source however often submitted): they build while the GPU
        times what came before them; :meth:`evaluate_torch` finds them built or building."""
        arch = self.device_info().compute_capability
        deadline = time.monotonic() + self.builds.wall_s  # queueing included
        for source in sources:
            self.builds.submit(source, arch, deadline)

    def _ahead_of_turn(self, source: str, arch: str) -> _Started | None:
        """:meth:`_spare` before its answer's turn on the device, so its start overlaps other
        work: at most :data:`AHEAD` per device at once (each holds a CUDA context); None when as
        many are ahead already (it starts at its turn)."""
        if not self._ahead.acquire(blocking=False):
            return None
        try:
            return self._spare(self._workers[0], source, arch, self._ahead.release)
        except BaseException:
            self._ahead.release()
            raise

    def _spare(
        self, worker: WorkerProcess, source: str, arch: str, done: Callable[[], None] | None = None
    ) -> _Started:
        """A fresh PyTorch worker process for the answer ``source`` on ``worker``'s device,
        started now in the background (torch imported, the device described: an
        :class:`InfoJob`, before any answer's code runs in it); the build directory
        (:meth:`BuildPool.directory`) is bound writable; ``done``: called once it is taken or
        closed."""
        directory = self.builds.directory(source, arch)
        if directory:  # a build that did not finish left none
            os.makedirs(directory, exist_ok=True)
        bind = ("--bind", directory, directory) if worker.prefix and directory else ()
        proc = WorkerProcess(worker.device, worker.backend, self.torch_handler, (*worker.prefix, *bind))

        def start() -> WorkerProcess:
            proc.call(InfoJob(), SPARE_START_S)  # a process that fails it is started again by its job
            return proc

        return _Started(self._starters.submit(start), done)

    def close(self) -> None:
        for w in self._workers:
            w.close()
        self._pool.close()
        self._starters.shutdown(wait=False, cancel_futures=True)
        if self._own_builds:
            self.builds.close()


class _Started:
    """A worker process being started (:meth:`LocalExecutor._spare`): taken by its job or closed,
    once; ``done``: called then (a place ahead given back)."""

    def __init__(
        self, future: concurrent.futures.Future[WorkerProcess], done: Callable[[], None] | None
    ) -> None:
        self.future = future
        self.done = done

    def _settle(self) -> None:
        if self.done is not None:
            self.done()
            self.done = None

    def take(self) -> WorkerProcess:
        """The process, once started (its job's to close)."""
        try:
            return self.future.result()
        finally:
            self._settle()

    def close(self) -> None:
        """The process will not be used: ended once its start is over."""
        self._settle()
        self.future.add_done_callback(lambda f: None if f.cancelled() else f.result().close())
        self.future.cancel()


def split_by_defines(req: EvalRequest) -> tuple[EvalRequest, ...]:
    """``req`` as one request per distinct set of :attr:`Problem.defines`, each compiling every
    kernel with its ``-DNAME=VALUE`` flags: verify-only parts first, then the part that holds the
    bench problem (timed, sanitized, profiled as asked).  Without defines: ``(req,)``."""
    problems = (*req.verify_problems, req.bench_problem)
    groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for i, p in enumerate(problems):
        groups.setdefault(tuple(sorted(p.defines.items())), []).append(i)
    bench_key = tuple(sorted(req.bench_problem.defines.items()))
    if not bench_key and len(groups) == 1:
        return (req,)
    order = [key for key in groups if key != bench_key] + [bench_key]
    parts = []
    for n, key in enumerate(order):
        index = groups[key]
        flags = tuple(f"-D{name}={value}" for name, value in key)
        candidates = tuple(
            replace(
                c,
                kernel=replace(c.kernel, options=(*c.kernel.options, *flags)),
                launches=None if c.launches is None else tuple(c.launches[i] for i in index),
            )
            for c in req.candidates
        )
        timed = n == len(order) - 1
        parts.append(
            replace(
                req,
                id=f"{req.id[:180]}#define{n}",
                baseline=replace(req.baseline, options=(*req.baseline.options, *flags)),
                candidates=candidates,
                verify_problems=tuple(problems[i] for i in index[:-1]),
                bench_problem=problems[index[-1]],
                options=req.options
                if timed
                else replace(req.options, time=False, sanitize=False, profile=False),
            )
        )
    return tuple(parts)


def merge_parts(req: EvalRequest, parts: Sequence[EvalResult]) -> EvalResult:
    """One result for ``req`` from those of its :func:`split_by_defines` parts: per kernel, the
    first part that did not pass (with the checks so far), else the timed part's, with every check."""
    if len(parts) == 1:
        return replace(parts[0], request_id=req.id)

    def merged(results: list[CandidateResult]) -> CandidateResult:
        end = next((k for k, r in enumerate(results) if r.status != Status.OK), len(results) - 1)
        return replace(results[end], checks=tuple(c for r in results[: end + 1] for c in r.checks))

    return EvalResult(
        req.id,
        merged([p.baseline for p in parts]),
        tuple(merged([p.candidates[i] for p in parts]) for i in range(len(req.candidates))),
        parts[-1].device,
    )


def bench_request(
    kernel: KernelSource,
    problem: Problem,
    *,
    seeds: tuple[int, ...] = (1, 2, 3),
    budget: Budget | None = None,
    request_id: str = "",
) -> EvalRequest:
    """The sandbox half of ``cuda-agent bench``: ``kernel`` checked against itself on ``problem``
    (guards, inputs untouched, run-twice determinism, 3 seeds) and timed alone, L2 flushed.
    The result's ``baseline`` holds the timing, GB/s, GFLOP/s and % of the device's ceilings.
    ``request_id``: empty for a fresh one (a worker answers a repeated id from its cache)."""
    return EvalRequest(
        id=request_id or f"bench-{uuid.uuid4().hex}",
        baseline=kernel,
        candidates=(),
        verify_problems=(),
        bench_problem=problem,
        seeds=seeds,
        budget=budget or Budget(),
    )


class _Evaluation:
    """One request on one worker."""

    def __init__(
        self,
        executor: LocalExecutor,
        worker: WorkerProcess,
        info: DeviceInfo,
        request: EvalRequest,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
    ) -> None:
        self.ex, self.worker, self.info, self.request = executor, worker, info, request
        self.progress, self.cancel = progress, cancel or threading.Event()
        self.arch = request.options.arch or "sm_" + info.compute_capability.replace(".", "")
        self.compile_deadline = executor._pool.deadline()  # all of this request's compiles
        # the __constant__ data whose symbols NVRTC lowers (``mask<float>``): looked up by them
        self.constants = lowered_constants((*request.verify_problems, request.bench_problem))

    def _compile(self, kernel: KernelSource) -> Any:
        return self.ex._pool.submit(
            kernel.source,
            filename=kernel.filename,
            name_expressions=(kernel.name, *self.constants.values()),
            arch=self.arch,
            options=kernel.options,
            headers=kernel.headers,
            deadline=self.compile_deadline,
        )

    def run(self) -> EvalResult:
        req = self.request
        futures = [self._compile(req.baseline)] + [self._compile(c.kernel) for c in req.candidates]
        total = len(req.candidates) + 1
        budget = req.budget
        started = time.perf_counter()
        base_bin, baseline = self._prepare(futures[0], req.baseline, "baseline", budget.timeout_s)
        if base_bin is not None:
            job = EvalJob(req, base_bin, -1)
            reply = self.worker.call(job, 2 * budget.timeout_s, self.cancel)
            baseline = self._finish(reply, job, started, baseline)
        self._report(1, total, f"baseline: {baseline.status.value}")
        results: list[CandidateResult] = []
        for i, (cand, fut) in enumerate(zip(req.candidates, futures[1:], strict=True)):
            started = time.perf_counter()
            if self.cancel.is_set():
                fut.cancel()
                results.append(CandidateResult(cand.id, Status.CANCELLED, "cancelled"))
            elif base_bin is None or baseline.status != Status.OK:
                fut.cancel()
                results.append(
                    CandidateResult(cand.id, Status.CANCELLED, f"baseline failed: {baseline.message}")
                )
            else:
                binary, result = self._prepare(fut, cand.kernel, cand.id, budget.timeout_s)
                if binary is not None:
                    job = EvalJob(req, base_bin, i, binary)
                    remaining = budget.timeout_s - (time.perf_counter() - started)
                    reply = self.worker.call(job, remaining, self.cancel)
                    result = self._finish(reply, job, started, result)
                    if result.status == Status.OK and req.options.sanitize:
                        result = sanitize(self.worker, job, result, budget, self.cancel)
                    if result.status == Status.OK and req.options.profile:
                        result = replace(result, profile=nsight_profile(self.worker, job, budget))
                results.append(result)
            self._report(i + 2, total, f"{cand.id}: {results[-1].status.value}")
        return EvalResult(req.id, baseline, tuple(results), self.info)

    def _prepare(
        self, fut: Any, kernel: KernelSource, cid: str, timeout: float
    ) -> tuple[Binary | None, CandidateResult]:
        """Wait for a compile (until ``timeout`` or cancel); the binary to run, or None and the
        result that ends this candidate."""
        deadline = time.monotonic() + timeout
        while not fut.done():
            if self.cancel.is_set():
                fut.cancel()
                return None, CandidateResult(cid, Status.CANCELLED, "cancelled while compiling")
            if time.monotonic() >= deadline:
                return None, CandidateResult(cid, Status.TIMEOUT, f"compilation took over {timeout:.0f} s")
            concurrent.futures.wait([fut], timeout=CANCEL_POLL_S)
        try:
            compiled = fut.result()
        except concurrent.futures.CancelledError:
            return None, CandidateResult(cid, Status.CANCELLED, "cancelled while compiling")
        except Exception as exc:  # the compiler process died on this input
            return None, CandidateResult(cid, Status.COMPILE_ERROR, f"compiler failed: {exc}")
        res = compiled.result
        symbol = res.lowered_names.get(kernel.name, kernel.name)
        base = CandidateResult(cid, Status.OK, compile_log=res.log, resources=res.resources.get(symbol))
        if not res.ok:
            return None, replace(base, status=Status.COMPILE_ERROR, message=res.first_error())
        if why := static_rejection(kernel, compiled.binary):
            return None, replace(base, status=Status.REJECTED, message=why)
        symbols = {name: res.lowered_names.get(expr, name) for name, expr in self.constants.items()}
        return Binary(compiled.binary, symbol, symbols), base

    def _finish(
        self, reply: Reply, job: EvalJob, started: float, compiled: CandidateResult
    ) -> CandidateResult:
        if reply.unavailable:
            raise NoGpuError(reply.unavailable)
        result = reply.value
        if not isinstance(result, CandidateResult):
            raise ExecutorError(f"GPU worker answered {type(result).__name__} to an evaluation")
        result = replace(
            result,
            compile_log=compiled.compile_log,
            resources=compiled.resources,
            seconds=time.perf_counter() - started,
        )
        result = with_throughput(result, job.request.bench_problem, self.info)
        if job.candidate is not None:  # the physics floor (a baseline is what it is)
            result = physics_floor(result, job.request.bench_problem)
        return result

    def _report(self, done: int, total: int, message: str) -> None:
        if self.progress is not None:
            self.progress(Progress(self.request.id, done, total, message))
