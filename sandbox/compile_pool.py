"""CompilePool: compile untrusted units in isolated compile worker processes, in parallel."""

from __future__ import annotations

import functools
import multiprocessing
import queue
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from sandbox.compiler import (
    Compiled,
    CompilerUnavailable,
    cache_get,
    cache_key,
    cache_put,
    resource_limited,
)
from sandbox.confine import CompileLimits, ConfinementError, landlock_abi
from sandbox.isolation import compile_bwrap_prefix
from sandbox.process import WorkerProcess
from sandbox.wire import COMPILE_HANDLER, CompileJob


@functools.cache
def compile_isolation() -> str:
    """How :class:`CompilePool` isolates a compile from the host here: ``bwrap+landlock``,
    ``bwrap``, ``landlock`` or ``none`` (then a request's compile sees what this user sees)."""
    parts = [name for name, ok in (("bwrap", compile_bwrap_prefix()), ("landlock", landlock_abi())) if ok]
    return "+".join(parts) or "none"


UNISOLATED = (
    "compiles cannot be isolated from this host here (no usable bubblewrap, no Landlock), so untrusted "
    "code could read this host's files through the compiler; install bubblewrap (or use Linux 5.13+ "
    "with Landlock), or pass --unsafe-no-isolation to compile unconfined anyway"
)


class _Policy:
    """This process's one isolation rule: untrusted compiles are confined, or refused, unless the
    user said ``--unsafe-no-isolation`` (:func:`allow_unisolated_compiles`)."""

    unisolated_allowed = False


def allow_unisolated_compiles() -> None:
    """``--unsafe-no-isolation``: this process may compile untrusted code where nothing confines it."""
    _Policy.unisolated_allowed = True


def unisolated_allowed() -> bool:
    """Whether this process was started with ``--unsafe-no-isolation``."""
    return _Policy.unisolated_allowed


def require_isolation() -> str:
    """:func:`compile_isolation`, or :class:`ConfinementError` when it is ``none`` and this process
    was not started with ``--unsafe-no-isolation``.  Every process that compiles untrusted code (the
    worker, ``reward serve``, the LLM's ``compile`` tool, simulated GPUs) passes here, through
    :class:`CompilePool`."""
    isolation = compile_isolation()
    if isolation == "none" and not _Policy.unisolated_allowed:
        raise ConfinementError(f"refusing to compile untrusted code: {UNISOLATED}")
    return isolation


class CompilePool:
    """Compile untrusted units (requests, LLM output) in parallel with GPU work, each in a compile
    worker process (``python -m sandbox.child`` with :class:`sandbox.child.CompileHandler`),
    isolated from the host as :func:`compile_isolation` says: inside bubblewrap when it works
    (:func:`sandbox.isolation.compile_bwrap_prefix`) and confined by Landlock where the kernel has it
    (:mod:`sandbox.confine`), with an environment that holds no token or key, talking JSON, under
    ``limits``.  A compile that crashes, hangs or exceeds a limit is that unit's compile error
    (``resource limit: ...``), and the worker is replaced.  Where nothing can isolate it, the pool
    is refused (:func:`require_isolation`: :class:`~sandbox.confine.ConfinementError`) unless the
    process was started with ``--unsafe-no-isolation``.  ``sandbox=False`` (tests): no isolation
    at all.  Results are cached by content hash."""

    def __init__(
        self, workers: int | None = None, *, sandbox: bool = True, limits: CompileLimits | None = None
    ) -> None:
        n = workers or min(8, multiprocessing.cpu_count())
        self.isolation = require_isolation() if sandbox else "none"
        prefix = compile_bwrap_prefix() if sandbox else ()
        self.limits = limits = limits or CompileLimits()
        args = ["--max-memory", str(limits.memory_bytes), "--max-cpu-s", str(limits.cpu_s)]
        if "landlock" in self.isolation:
            args.append("--landlock")
        self._workers = [WorkerProcess(handler=COMPILE_HANDLER, prefix=prefix, args=args) for _ in range(n)]
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        for w in self._workers:
            self._idle.put(w)
        self._threads = ThreadPoolExecutor(n, thread_name_prefix="compile")

    def deadline(self) -> float:
        """The ``time.monotonic()`` by which a request starting now must have compiled everything."""
        return time.monotonic() + self.limits.request_s

    def submit(
        self,
        source: str,
        *,
        filename: str = "kernel.cu",
        name_expressions: Sequence[str] = (),
        arch: str = "sm_90",
        options: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
        deadline: float | None = None,
    ) -> Future[Compiled]:
        """Compile in a worker; ``deadline`` (from :meth:`deadline`, shared by one request's units):
        a unit not compiled by then is a ``resource limit`` compile error."""
        key = cache_key(source, filename, name_expressions, arch, options, headers)
        hit = cache_get(key)
        if hit is not None:
            done: Future[Compiled] = Future()
            done.set_result(replace(hit, result=replace(hit.result, cached=True, seconds=0.0)))
            return done
        job = CompileJob(source, filename, tuple(name_expressions), arch, tuple(options), dict(headers or {}))
        fut = self._threads.submit(self._run, job, deadline)

        def remember(f: Future[Compiled]) -> None:
            if not f.cancelled() and f.exception() is None and not f.result().limited:
                cache_put(key, f.result())

        fut.add_done_callback(remember)
        return fut

    def _run(self, job: CompileJob, deadline: float | None) -> Compiled:
        worker = self._idle.get()
        try:
            timeout = self.limits.wall_s
            if deadline is not None:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout <= 0:
                    return resource_limited(
                        f"the request's compiles took over {self.limits.request_s:.0f} s together"
                    )
            reply = worker.call(job, timeout)
        finally:
            self._idle.put(worker)
        if not isinstance(reply.value, Compiled):
            raise CompilerUnavailable(reply.unavailable or "the compile worker gave no result")
        return reply.value

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        for w in self._workers:
            w.close(timeout=1.0)
