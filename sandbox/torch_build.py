"""The build stage of PyTorch answers: ``load_inline`` extensions built in parallel, ahead of timing.

An answer that builds C++/CUDA with ``torch.utils.cpp_extension.load_inline`` spends 30-60 s in
nvcc before its first timed call; the GPU is idle meanwhile.  :class:`BuildPool` builds answers
in worker processes of their own (bounded concurrency) while the GPU times others, into a build
directory per answer, ``<root>/<key>``, keyed by :func:`build_key` (the answer's source, the arch
list it is built for, the torch version).  The timing worker (``sandbox.torch_eval``) is pointed
at the same directory (:class:`~sandbox.wire.TorchJob` ``build_dir``): ``load_inline`` there
writes the same sources and ``build.ninja`` (it rewrites neither when unchanged) and ninja finds
nothing to do, so the worker only loads the built module.  Triton compiles on its first call, on
the GPU: its cache (``TRITON_CACHE_DIR``) lives in the same directory, so a second evaluation of
the same source compiles nothing either.

Isolation: a build runs the answer's module (that is what calls ``load_inline``) and nvcc, so it
runs only where answers run: a fresh worker process with the GPU workers' bubblewrap prefix
(:func:`sandbox.isolation.bwrap_prefix`) plus its build directory bound writable, a clean
environment, its own process group, killed at the deadline, no GPU visible
(``CUDA_VISIBLE_DEVICES`` empty).  The answer is screened first (:func:`sandbox.screen.screen`).
A build directory holds one source's artefacts only: an answer that writes into its own can only
change what a later evaluation of the very same source loads.

Verdicts are values (:class:`~sandbox.wire.Built`): a build that fails (``load_inline`` raised) is
that answer's ``compile_error`` and it never reaches a GPU; a build that raises for any other
reason (module code that needs the GPU) is left for the timing worker to judge; one past its
deadline is the answer's ``timeout``.  Verdicts are cached by key across requests (in memory,
and for built answers on disk: ``built.json``); a deadline or a broken worker is never cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sandbox.contract import Status
from sandbox.process import WorkerProcess
from sandbox.screen import screen
from sandbox.torch_eval import _module, _why, point_at
from sandbox.wire import BuildJob, Built, Reply

log = logging.getLogger(__name__)

BUILD_HANDLER = "sandbox.torch_build:BuildHandler"
BUILD_WALL_S = 300.0  # one answer's build, from its submission (waiting for a build worker included)
MAX_ENTRIES = 1024  # build directories kept (a CUDA extension's is a few MB): the least recently used go
# a load_inline build keeps ~2 cores busy (ninja compiles its C++ and CUDA units side by side):
# half the cores, shared by every GPU of the host (sandbox.executors)
BUILD_WORKERS = max(1, min(32, (os.cpu_count() or 2) // 2))
MARKER = "built.json"
MESSAGE_CHARS = 600

Builder = Callable[[BuildJob, float], Built]  # (job, seconds left) -> verdict


def torch_version() -> str:
    """The installed torch's version, without importing it ("" when there is none)."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return ""


def build_key(source: str, arch: str, version: str) -> str:
    """What a build's artefacts depend on: the answer's source, the arch list and torch's version."""
    h = hashlib.sha256()
    for part in (source, arch, version):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def default_root() -> Path:
    return Path(tempfile.gettempdir()) / "cuda-agent-torch-builds"


class BuildHandler:
    """Serves :class:`BuildJob` s in a build worker: run the answer's module, which builds its
    extensions; report whether ``load_inline`` (or ``load``) failed."""

    def __init__(self, device: int, backend: str) -> None:
        pass

    def __call__(self, job: Any) -> Reply:
        if not isinstance(job, BuildJob):
            return Reply(None, unavailable="a build worker only builds")
        return Reply(build_here(job))


def build_here(job: BuildJob) -> Built:
    """Build ``job``'s answer in this process (a build worker)."""
    start = time.perf_counter()
    status, why = screen(job.source)
    if status is not None:
        return Built(status, why, time.perf_counter() - start)
    point_at(job.directory, job.arch)
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import torch.utils.cpp_extension as ext

    failures: list[str] = []

    def watched(real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return real(*args, **kwargs)
            except Exception as exc:
                failures.append(_why(exc))
                raise

        return call

    ext.load_inline, ext.load = watched(ext.load_inline), watched(ext.load)
    try:
        _module(job.source, "answer.py")
    except BaseException as exc:  # the answer's own code: its verdict, never this worker's end
        seconds = time.perf_counter() - start
        if failures:
            return Built(Status.COMPILE_ERROR, f"building the extension failed: {failures[0]}", seconds)
        return Built(None, f"not built here ({_why(exc)}): the GPU worker builds it", seconds)
    return Built(None, "built", time.perf_counter() - start)


def spawn_builder(prefix: tuple[str, ...]) -> Builder:
    """Builds in a fresh worker process: ``prefix`` (bubblewrap's, or () unconfined) with the
    build directory bound writable."""

    def build(job: BuildJob, seconds: float) -> Built:
        bind = ("--bind", job.directory, job.directory) if prefix else ()
        proc = WorkerProcess(0, "torch", BUILD_HANDLER, (*prefix, *bind))
        try:
            reply = proc.call(job, seconds)
        finally:
            proc.close(timeout=1.0)
        if isinstance(reply.value, Built):
            return reply.value
        return Built(None, reply.unavailable or "the build worker gave no result", 0.0, final=False)

    return build


class BuildPool:
    """Builds answers (:class:`BuildJob`) with at most ``workers`` at a time through ``builder``
    (:func:`spawn_builder` in production; tests inject a stand-in); verdicts cached by
    :func:`build_key` across requests; one key is built once however many ask."""

    def __init__(
        self,
        builder: Builder,
        *,
        workers: int = 4,
        root: Path | None = None,
        version: str | None = None,
        wall_s: float = BUILD_WALL_S,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self.builder = builder
        self.root = root or default_root()
        self.version = torch_version() if version is None else version
        self.wall_s = wall_s
        self.max_entries = max_entries
        self._threads = ThreadPoolExecutor(max(1, workers), thread_name_prefix="torch-build")
        self._lock = threading.Lock()
        self._known: dict[str, Future[Built]] = {}
        # hits: a verdict reused; joined: a build already under way (submitted ahead, asked again)
        self.counts = {"built": 0, "hits": 0, "joined": 0, "failed": 0, "unsettled": 0}

    def directory(self, source: str, arch: str) -> str:
        """Where ``source`` is built ("": nowhere, torch is not installed here)."""
        return str(self.root / build_key(source, arch, self.version)) if self.version else ""

    def submit(self, source: str, arch: str, deadline: float | None = None) -> Future[Built]:
        """The build of ``source`` for ``arch``; ``deadline`` (``time.monotonic()``): past it, the
        answer's verdict is ``timeout`` (and the next request builds it again)."""
        if not self.version:  # no torch: nothing can be built ahead (the worker reports it)
            skipped: Future[Built] = Future()
            skipped.set_result(Built(None, "torch is not installed: not built ahead", 0.0, final=False))
            return skipped
        key = build_key(source, arch, self.version)
        directory = self.root / key
        with self._lock:
            known = self._known.get(key)
            if known is not None:
                self.counts["hits" if known.done() else "joined"] += 1
                _touch(directory)
                return known
            stored = _read_marker(directory)
            future: Future[Built] = Future()
            self._known[key] = future
            if stored is not None:
                self.counts["hits"] += 1
                _touch(directory)
                future.set_result(stored)
                return future
        job = BuildJob(source, str(directory), arch)
        self._threads.submit(self._run, key, job, deadline, future)
        return future

    def _run(self, key: str, job: BuildJob, deadline: float | None, future: Future[Built]) -> None:
        seconds = self.wall_s if deadline is None else min(self.wall_s, deadline - time.monotonic())
        try:
            if seconds <= 0:
                built = Built(Status.TIMEOUT, "the deadline passed before it was built", 0.0, final=False)
            else:
                Path(job.directory).mkdir(parents=True, exist_ok=True)
                built = self.builder(job, seconds)
        except Exception as exc:  # a broken builder: this item's verdict, not the request's
            log.exception("building a PyTorch answer failed")
            built = Built(None, f"the build stage failed: {type(exc).__name__}: {exc}", 0.0, final=False)
        outcome = "unsettled" if not built.final else "failed" if built.verdict else "built"
        with self._lock:
            self.counts[outcome] += 1
            if not built.final:  # a deadline or a broken worker: the next request tries again
                self._known.pop(key, None)
        if built.final:
            _write_marker(Path(job.directory), built)
        self._prune()
        future.set_result(built)

    def _prune(self) -> None:
        """At most :attr:`max_entries` build directories: the least recently used (by their
        ``built.json``, touched on every hit) go with their verdicts; one being built stays."""
        try:
            entries = [p for p in self.root.iterdir() if p.is_dir()]
        except OSError:
            return
        if len(entries) <= self.max_entries:
            return
        with self._lock:
            busy = {k for k, f in self._known.items() if not f.done()}
        done = [(_used(p), p) for p in entries if p.name not in busy and (p / MARKER).exists()]
        for _, path in sorted(done)[: len(entries) - self.max_entries]:
            with self._lock:
                self._known.pop(path.name, None)
            shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)


def _touch(directory: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(directory / MARKER)


def _used(directory: Path) -> float:
    try:
        return (directory / MARKER).stat().st_mtime
    except OSError:
        return 0.0


def _read_marker(directory: Path) -> Built | None:
    try:
        body = json.loads((directory / MARKER).read_text(encoding="utf-8"))
        verdict = None if body["verdict"] is None else Status(body["verdict"])
        message = str(body["message"])[:MESSAGE_CHARS]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Built(verdict, message, 0.0, cached=True)


def _write_marker(directory: Path, built: Built) -> None:
    body = {"verdict": built.verdict and built.verdict.value, "message": built.message[:MESSAGE_CHARS]}
    try:
        (directory / MARKER).write_text(json.dumps(body), encoding="utf-8")
    except OSError as exc:
        log.warning("cannot record a build in %s: %s", directory, exc)
