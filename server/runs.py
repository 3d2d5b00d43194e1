"""Runs in the background: the run table, one run per kernel at a time, its progress, the status line, its end.

Each run feature (optimize, benchmark, compare, profile, capture) adds one row to the run table
(:func:`add_run_type`: its kind, its command and a plan); :func:`start_run` is the one way a run
starts, whatever its kind.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from lsprotocol import types as lsp

from agent.proposal import Proposal
from agent.records import BenchmarkRecord, CompareRecord, OptimizeRecord, ProfileRecord
from agent.target import Target, TargetError, target_for
from base.errors import InputError, Unavailable
from sandbox.compile_pool import CompilePool
from sandbox.contract import Progress as EvalProgress
from sandbox.executor import Executor, NoGpuError
from sandbox.executors import ExecutorSettings, make_executor
from server import protocol as wire
from server.lsp import CudaLanguageServer, OpenDocument
from server.protocol import RunKind, RunStatus, StartStatus
from server.settings import compile_options
from server.texts import describe_executor

log = logging.getLogger(__name__)


LATE_STATUS_S = 0.3  # see Runs.late_status


@dataclass(frozen=True)
class PendingRewrite:
    """A verified rewrite waiting for the user: what the editor is shown (``rewrite``, the wire's
    :class:`~server.protocol.Rewrite`), the edits that apply it (kernel + launch sites, against
    ``rewrite.original``) and the proposal the run verified (a Profile run profiles it too)."""

    rewrite: wire.Rewrite
    edits: tuple[lsp.TextEdit, ...]
    proposal: Proposal | None = None


@dataclass
class ActiveRun:
    """A run in progress (event loop only)."""

    run_id: str
    kind: RunKind
    uri: str
    kernel: str
    cancel: threading.Event
    percent: int = 0
    task: asyncio.Task[None] | None = None


Report = Callable[[int, str, bool], None]
"""How a run's work tells its step from its own thread: (percent, message, force: shown even if
the last report was moments ago)."""

T = TypeVar("T")


async def run_with_progress(
    ls: CudaLanguageServer, run: ActiveRun, progress: RunProgress, begin: str, work: Callable[[Report], T]
) -> T:
    """The body of every run: begin ``progress`` with ``begin``, run ``work`` on the runs' pool, and
    show each step it reports on the run, its progress and the status line; ``work``'s result."""
    runs = ls.need(Runs)
    assert ls.loop is not None
    await progress.begin(begin)
    runs.status()

    def show(percent: int, message: str, force: bool) -> None:
        run.percent = percent
        progress.report(percent, message, force=force)
        runs.status()

    def report(percent: int, message: str, force: bool) -> None:  # work's thread
        ls.call_soon(show, percent, message, force)

    return await ls.loop.run_in_executor(runs.pool, work, report)


def evaluation_steps(report: Report) -> Callable[[EvalProgress], None]:
    """The executor's progress callback, reporting each evaluation step (compile, check, time...)."""
    return lambda p: report(int(100 * p.done / max(p.total, 1)), p.message or f"{p.done}/{p.total}", False)


class Runs:
    """Runs in progress, verified rewrites waiting for the user, and the executor (event loop only,
    except :meth:`executor`, which background threads call)."""

    def __init__(self, ls: CudaLanguageServer) -> None:
        self.ls = ls
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cuda-agent-run")
        self.table: dict[RunKind, RunType] = {}  # the run table: each kind's command and plan
        self.active: dict[str, ActiveRun] = {}
        self.rewrites: dict[str, PendingRewrite] = {}
        self.generation = 0  # bumped when runs start or end, or pending rewrites change
        self.device = ""
        self._lock = threading.Lock()
        self._executor: tuple[ExecutorSettings, Executor] | None = None
        self._compiler: CompilePool | None = None
        self._late: asyncio.TimerHandle | None = None  # see late_status

    def compiler(self) -> CompilePool:
        """The CPU compile pool LLM proposers compile drafts in (made on first use, kept)."""
        with self._lock:
            if self._compiler is None:
                self._compiler = CompilePool(workers=2)
            return self._compiler

    def executor(self, settings: ExecutorSettings) -> Executor:
        """The executor for ``settings``, made on first use and kept (call from a worker thread)."""
        with self._lock:
            if self._executor is not None and self._executor[0] == settings:
                return self._executor[1]
            old, self._executor = self._executor, None
            if old is not None:
                old[1].close()
            executor = make_executor(settings)
            self._executor = (settings, executor)
            return executor

    def pending(self, od: OpenDocument, kernel: str) -> PendingRewrite | None:
        """The latest rewrite of ``kernel`` computed against exactly this text of the document."""
        found = [
            p
            for p in self.rewrites.values()
            if p.rewrite.uri == od.uri and p.rewrite.kernel == kernel and p.rewrite.original == od.text
        ]
        return found[-1] if found else None

    def running(self, uri: str, kernel: str) -> ActiveRun | None:
        return next((r for r in self.active.values() if r.uri == uri and r.kernel == kernel), None)

    def changed(self) -> None:
        """Runs started or ended, or pending rewrites changed: lenses and code actions refresh."""
        self.generation += 1
        self.ls.results_changed()

    def status(self) -> None:
        if not self.ls.ready:
            return
        run = next(iter(self.active.values()), None)
        running = wire.RunningStatus(run.run_id, run.kind, run.kernel, run.percent) if run else None
        status = wire.ServerStatus(describe_executor(self.ls.settings.executor), self.device, running)
        self.ls.protocol.notify(wire.STATUS_NOTIFICATION, status)

    def late_status(self) -> None:
        """The status again, :data:`LATE_STATUS_S` after the end of a run, in a read of its own.

        Emacs 28's jsonrpc (1.0.14, under eglot) leaves the messages that arrive in the same read
        as the reply to a synchronous request (``eglot-execute-command``) unprocessed until more
        output arrives.  A run's end often lands right behind such a reply (the reply to
        ``cudaAgent.cancel``), and the server is idle after it: this late message makes the
        client process them."""
        if self.ls.loop is None:
            return
        if self._late is not None:
            self._late.cancel()
        self._late = self.ls.loop.call_later(LATE_STATUS_S, self.status)

    def cancel(self, run_id: str) -> wire.CancelResult:
        run = self.active.get(run_id)
        if run is None:
            return wire.CancelResult(False, f"no run {run_id!r} in progress")
        run.cancel.set()
        log.info("cancelling the %s run of %s (%s)", run.kind.value, run.kernel, run_id)
        return wire.CancelResult(True, f"cancelling the {run.kind.value} run of {run.kernel}")

    async def cancel_all(self, timeout_s: float) -> None:
        """Cancel every run and wait (up to ``timeout_s``) until each has ended and reported."""
        for run in self.active.values():
            run.cancel.set()
        deadline = time.monotonic() + timeout_s
        while self.active and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    def close(self) -> None:
        if self._late is not None:
            self._late.cancel()
        for run in self.active.values():
            run.cancel.set()
        self.pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            if self._executor is not None:
                self._executor[1].close()
                self._executor = None
            if self._compiler is not None:
                self._compiler.close()
                self._compiler = None


class RunProgress:
    """A run's progress as the client can show it: server-initiated work-done progress with cancel
    where the client supports it, else log lines (``window/logMessage``) and a message
    (``window/showMessage``) at the start and the end."""

    LOG_EVERY_S = 2.0

    def __init__(self, ls: CudaLanguageServer, run: ActiveRun, title: str) -> None:
        self.ls = ls
        self.run = run
        self.title = title
        self.token = f"cuda-agent/{run.run_id}"
        self.enabled = False
        self.last = 0.0

    async def begin(self, message: str) -> None:
        window = self.ls.client_capabilities.window
        if window is not None and window.work_done_progress:
            try:
                await self.ls.work_done_progress.create_async(self.token)
            except Exception as exc:
                log.info("no progress bar: %s", exc)
            else:
                self.enabled = True
                self.ls.work_done_progress.begin(
                    self.token,
                    lsp.WorkDoneProgressBegin(
                        title=self.title, message=message, percentage=0, cancellable=True
                    ),
                )
                # pygls cancels this future on window/workDoneProgress/cancel
                self.ls.work_done_progress.tokens[self.token].add_done_callback(
                    lambda _: self.run.cancel.set()
                )
                return
        self._show(
            f"{self.title} (run {self.run.run_id}): {message}; "
            f"cancel with the command {wire.CANCEL_COMMAND} or the code action on the kernel"
        )

    def report(self, percent: int, message: str, force: bool = False) -> None:
        now = time.monotonic()
        every = 0.1 if self.enabled else self.LOG_EVERY_S
        if not force and now - self.last < every:
            return
        self.last = now
        if self.enabled:
            self.ls.work_done_progress.report(
                self.token, lsp.WorkDoneProgressReport(message=message, percentage=percent)
            )
        else:
            self.ls.window_log_message(
                lsp.LogMessageParams(
                    type=lsp.MessageType.Info, message=f"{self.title}: {percent}% · {message}"
                )
            )

    def end(self, message: str, shown: str | None = None) -> None:
        """End the progress with ``message``; clients without progress get ``shown`` (or
        ``message``) as a message."""
        if self.enabled:
            self.ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=message))
            self.ls.work_done_progress.tokens.pop(self.token, None)
            self.enabled = False
        else:
            self._show(f"{self.title}: {shown or message}")

    def _show(self, message: str) -> None:
        self.ls.window_show_message(
            lsp.ShowMessageParams(type=lsp.MessageType.Info, message=f"CUDA Agent: {message}")
        )


RunBody = Callable[["ActiveRun", "RunProgress"], Awaitable[wire.RunFinished]]


@dataclass(frozen=True)
class Plan:
    """A run about to start: the document and kernel it runs on, its progress title, its body."""

    uri: str
    kernel: str
    title: str
    body: RunBody


@dataclass(frozen=True)
class RunType:
    """A row of the run table: the command that starts runs of ``kind``, the type of its one
    argument, and ``plan``, which turns that argument into a :class:`Plan` (an
    :class:`~base.errors.InputError` refuses the start with its message; a bad argument is
    ``JsonRpcInvalidParams``)."""

    kind: RunKind
    command: str
    params: type[Any]
    plan: Callable[[CudaLanguageServer, Any], Plan]


def target_of(ls: CudaLanguageServer, od: OpenDocument, kernel: str) -> Target:
    """The kernel of an open document as a run target, with the editor's build configuration."""
    if od.doc is None:
        raise TargetError(f"{od.path.name} is too large to analyse")
    return target_for(od.doc, kernel, compile_options(ls.settings, od.path))


def add_run_type(ls: CudaLanguageServer, run_type: RunType) -> None:
    """Put ``run_type`` in the run table and register its command (its argument typed as
    ``run_type.params``); a feature's ``setup`` calls this once."""
    ls.need(Runs).table[run_type.kind] = run_type

    async def start_command(ls: CudaLanguageServer, params: Any) -> wire.RunStarted:
        return start_run(ls, run_type.kind, params)

    start_command.__annotations__ = {
        "ls": CudaLanguageServer,
        "params": run_type.params,
        "return": wire.RunStarted,
    }
    start_command.__name__ = f"start_{run_type.kind.value}"
    ls.command(run_type.command)(start_command)


def start_run(ls: CudaLanguageServer, kind: RunKind, params: Any) -> wire.RunStarted:
    """The one start of every run: the table's plan for ``kind`` from the command's argument, then
    the run in the background (one run per kernel at a time); answers at once with the run id."""
    try:
        plan = ls.need(Runs).table[kind].plan(ls, params)
    except InputError as exc:
        return wire.RunStarted("", kind, StartStatus.ERROR, str(exc))
    runs = ls.need(Runs)
    busy = runs.running(plan.uri, plan.kernel)
    if busy is not None:
        return wire.RunStarted(
            busy.run_id, busy.kind, StartStatus.BUSY, f"{plan.kernel} is already running ({busy.kind.value})"
        )
    run = ActiveRun(uuid.uuid4().hex[:12], kind, plan.uri, plan.kernel, threading.Event())
    runs.active[run.run_id] = run
    runs.changed()
    run.task = asyncio.ensure_future(_run(ls, run, plan.title, plan.body))
    return wire.RunStarted(run.run_id, kind, StartStatus.STARTED, plan.title[0].lower() + plan.title[1:])


def run_finished(
    run: ActiveRun,
    status: RunStatus,
    message: str,
    *,
    cancelled: bool | None = None,
    rewrite_ready: bool = False,
    simulated: bool = False,
    benchmark: BenchmarkRecord | None = None,
    optimize: OptimizeRecord | None = None,
    compare: CompareRecord | None = None,
    profile: ProfileRecord | None = None,
) -> wire.RunFinished:
    """The run's end, with the run's record under its kind's name (``cancelled``: by default,
    whether the run was asked to stop)."""
    return wire.RunFinished(
        run.run_id,
        run.kind,
        run.uri,
        run.kernel,
        status,
        message,
        run.cancel.is_set() if cancelled is None else cancelled,
        rewrite_ready,
        simulated,
        benchmark,
        optimize,
        compare,
        profile,
    )


async def _run(ls: CudaLanguageServer, run: ActiveRun, title: str, body: RunBody) -> None:
    """A run from start to end: progress, the work, the record, the ``runFinished`` notification."""
    runs = ls.need(Runs)
    progress = RunProgress(ls, run, title)
    shown: str | None = None
    try:
        finished = await body(run, progress)
        if finished.rewrite_ready:
            shown = (
                f"{finished.message}; apply it with the code action or lens "
                f"“Apply verified rewrite” on {run.kernel}"
            )
    except NoGpuError as exc:
        _must_act(
            ls,
            f"CUDA Agent: cannot {run.kind.value} {run.kernel}: {exc}. Ways forward: a GPU here (an NVIDIA "
            "driver and the `gpu` extra in the server's Python) or a remote `cuda-agent worker` "
            "(executor.kind remote); or the simulated GPU to try the flow (executor.kind test)",
        )
        finished = run_finished(run, RunStatus.ERROR, f"failed: {exc}")
    except Unavailable as exc:  # no worker, nothing to confine compiles with, no model endpoint
        _must_act(ls, f"CUDA Agent: cannot {run.kind.value} {run.kernel}: {exc}")
        finished = run_finished(run, RunStatus.ERROR, f"failed: {exc}")
    except Exception as exc:
        log.exception("%s %s failed", run.kind.value, run.kernel)
        finished = run_finished(run, RunStatus.ERROR, f"failed: {exc}")
    finally:
        runs.active.pop(run.run_id, None)
    log.info("%s %s: %s", run.kind.value, run.kernel, finished.message)
    progress.end(finished.message, shown)
    runs.changed()
    runs.status()
    ls.protocol.notify(wire.RUN_FINISHED_NOTIFICATION, finished)
    runs.late_status()


def _must_act(ls: CudaLanguageServer, message: str) -> None:
    """A pop-up: only for errors the user must act on (no GPU, unreachable worker, bad token)."""
    ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=message))


def setup(ls: CudaLanguageServer) -> None:
    """The runs every run feature (optimize, benchmark, compare, profile, capture) starts on, and the
    command that cancels any of them."""
    runs = Runs(ls)
    ls.add_part(runs)
    ls.on_stop.append(runs.close)
    ls.on_settings.append(lambda s: runs.status())
    ls.on_ready.append(runs.status)

    async def cancel_all() -> None:
        await runs.cancel_all(timeout_s=5.0)

    ls.on_shutdown.append(cancel_all)

    @ls.command(wire.CANCEL_COMMAND)
    def cancel(ls: CudaLanguageServer, ref: wire.RunRef) -> wire.CancelResult:
        return runs.cancel(ref.run_id)
