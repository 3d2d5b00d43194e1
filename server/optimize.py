"""Optimize and benchmark from the editor; verified rewrites offered for confirmation.

The methods and their payloads are declared in :mod:`server.protocol` (ARCHITECTURE.md lists them):

- ``cudaAgent.optimize`` / ``cudaAgent.benchmark`` ``[KernelRef]`` answer at once with a
  :class:`~server.protocol.RunStarted` (the run id); the run goes on in a background thread
  through the configured executor.  Progress: ``$/progress`` (server-initiated, cancellable) for
  clients with ``window.workDoneProgress``, else ``window/logMessage`` lines and a
  ``window/showMessage`` at the start and the end.  The end: a ``cudaAgent/runFinished``
  notification; a verified faster rewrite is then offered as an **Apply** code lens and code
  action on the kernel (and fetched for a diff with ``cudaAgent/rewrite``).  The best verified
  candidate so far is kept on cancel.
- ``cudaAgent.cancel`` ``[RunRef]`` stops a run (so do the progress's cancel button and a
  code action / lens on the kernel while it runs).
- ``cudaAgent.applyRewrite`` ``[RunRef]``: the one apply path.  Refused, with a message, when the
  document changed since the run began; else one ``workspace/applyEdit`` (kernel, launch sites
  and the spec's launch line) against the document's version, whose change annotation needs
  confirmation.
- ``cudaAgent/results`` ``{uri?}``: stored results; ``cudaAgent/status`` (server → client):
  executor, device, the run in progress.

Each finished run is recorded in the workspace's result store; lenses and hints refresh.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from agent import loop
from agent.attempts import verdict_summary
from agent.proposal import Proposal
from agent.proposer import OptimizeBudget, Proposer
from agent.source import Document
from agent.target import Target, TargetError, target_for
from sandbox.compile_pool import CompilePool
from sandbox.contract import CandidateResult, DeviceInfo, Tolerance, to_dict
from sandbox.contract import Progress as EvalProgress
from sandbox.executor import Executor, ExecutorError, NoGpuError
from server import protocol as wire
from server.diagnostics import compile_options
from server.lsp import CudaLanguageServer, OpenDocument
from server.protocol import ApplyReason, RunKind, RunStatus, StartStatus
from server.settings import ExecutorSettings, Settings, make_executor
from server.store import BenchmarkRecord, OptimizeRecord, Roofline, kernel_hash, text_hash
from server.texts import SIMULATED, plural, spread_text

log = logging.getLogger(__name__)

LATE_STATUS_S = 0.3  # see Runs.late_status


# ------------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Rewrite:
    """A verified rewrite of one kernel, computed against one version of a document."""

    run_id: str
    uri: str
    version: int
    kernel: str
    original: str  # the whole document as the run saw it
    rewritten: str
    edits: tuple[lsp.TextEdit, ...]  # kernel + launch-site edits, against `original`
    speedup: float
    summary: str
    proposal: Proposal | None = None  # what the run verified (a Profile run profiles it too)
    simulated: bool = False

    @property
    def speedup_text(self) -> str:
        """``2.00× faster`` (``2.00× faster, simulated GPU, not measured``)."""
        return f"{self.speedup:.2f}× faster" + (f", {SIMULATED}" if self.simulated else "")


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


def position_at(text: str, offset: int) -> lsp.Position:
    """The LSP position (UTF-16 columns) of a character offset into ``text``."""
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    prefix = text[start:offset]
    return lsp.Position(line, len(prefix.encode("utf-16-le")) // 2)


def rewrite_edits(target: Target, result: loop.OptimizeResult) -> tuple[lsp.TextEdit, ...]:
    """The kernel's replacement and the launch-site edits, as LSP edits against ``target.text``."""
    assert result.best is not None
    end = target.definition_start + len(target.definition)
    edits = [loop.TextEdit(target.definition_start, end, result.best.proposal.code), *result.launch_edits]
    text = target.text
    return tuple(
        lsp.TextEdit(lsp.Range(position_at(text, e.start), position_at(text, e.end)), e.new_text)
        for e in sorted(edits, key=lambda e: e.start)
    )


def summary_of(result: loop.OptimizeResult) -> str:
    """One line: what the rewrite does, its launch, what it assumes, what the user must still do."""
    if result.best is None:
        return str(result.stop)
    p = result.best.proposal
    parts = [p.description]
    if result.launch is not None:
        launch = result.launch
        parts.append(
            "launch "
            + " ".join(
                f"{k}={v}"
                for k, v in (("grid", launch.grid), ("block", launch.block), ("smem", launch.shared))
                if v
            )
        )
    parts += [f"assumes {a}" for a in p.assumptions]
    if result.launch_todo:
        parts.append(f"⚠ {result.launch_todo}")
    return "; ".join(x for x in parts if x)


def _tolerance(t: Tolerance | None) -> str:
    return t.text() if t is not None else "calibrated"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def roofline(target: Target, device: DeviceInfo | None) -> Roofline | None:
    """The device's measured ceilings and the bench problem's work (None without a device)."""
    if device is None:
        return None
    p = target.bench_problem
    return Roofline(
        device.peak_bandwidth_gbps, device.peak_gflops, device.peak_tensor_gflops, p.bytes_moved, p.flops
    )


def optimize_record(
    run_id: str,
    target: Target,
    result: loop.OptimizeResult,
    original_hash: str,
    rewritten_hash: str,
    seeds: int,
) -> OptimizeRecord:
    best = result.best.result if result.best is not None else None
    base = result.baseline.timing
    cand = best.timing if best is not None else None
    return OptimizeRecord(
        run_id=run_id,
        outcome=result.outcome.value,
        speedup=result.speedup,
        speedup_low=result.speedup_low,
        speedup_high=result.speedup_high,
        baseline_ms=base.median_ms if base else 0.0,
        baseline_spread=base.rel_spread if base else 0.0,
        candidate_ms=cand.median_ms if cand else 0.0,
        candidate_spread=cand.rel_spread if cand else 0.0,
        sizes=tuple(c.label for c in result.verification),
        seeds=seeds,
        tolerance=_tolerance(target.tolerance),
        device=result.device.name if result.device else "",
        date=_now(),
        summary=summary_of(result),
        attempts=result.attempts,
        stop_reason=str(result.stop),
        original_hash=original_hash,
        rewritten_hash=rewritten_hash,
        launch_todo=result.launch_todo,
        baseline_gbps=result.baseline.achieved_gbps,
        baseline_gflops=result.baseline.achieved_gflops,
        roofline=roofline(target, result.device),
        simulated=result.simulated,
        history=result.records,
    )


def benchmark_record(
    target: Target, r: CandidateResult, device: str, info: DeviceInfo | None = None
) -> BenchmarkRecord:
    t = r.timing
    assert t is not None
    res = r.resources
    return BenchmarkRecord(
        median_ms=t.median_ms,
        q1_ms=t.q1_ms,
        q3_ms=t.q3_ms,
        rel_spread=t.rel_spread,
        gbps=r.achieved_gbps,
        pct_peak=r.pct_peak_bandwidth,
        problem=target.bench_problem.label,
        device=device,
        date=_now(),
        registers=res.registers if res else 0,
        spill_bytes=(res.spill_stores + res.spill_loads) if res else 0,
        gflops=r.achieved_gflops,
        roofline=roofline(target, info),
        simulated=info.simulated if info is not None else False,
    )


# ------------------------------------------------------------------------------------- factories


def make_proposer(settings: Settings, compiler: Callable[[], CompilePool]) -> Proposer:
    """The proposer the settings name; the LLM's ``compile`` tool uses ``compiler()``."""
    p = settings.proposer
    if p.kind == "llm":
        from agent.llm import LLMProposer, LLMSettings

        kind, _, where = p.api_key.source.partition(":")
        llm = LLMSettings.from_env(
            base_url=p.endpoint or None,
            model=p.model or None,
            api_key_env=where if kind == "env" else None,
            api_key_file=where if kind == "file" else None,
        )
        return LLMProposer(llm, compiler=compiler())
    from agent.builtin import BuiltinProposer

    return BuiltinProposer()


async def begin_evaluation(
    ls: CudaLanguageServer, run: ActiveRun, progress: Progress
) -> Callable[[EvalProgress], None]:
    """Start ``run``'s progress ("compiling" on its executor) and return the callback an executor
    thread calls with each evaluation step: it shows the step on the run and its progress."""
    runs = ls.runs
    assert runs is not None
    await progress.begin(f"{describe_executor(ls.settings.executor)}: compiling")
    runs.status()

    def show(p: EvalProgress) -> None:
        run.percent = int(100 * p.done / max(p.total, 1))
        progress.report(run.percent, p.message or f"{p.done}/{p.total}")
        runs.status()

    def on_progress(p: EvalProgress) -> None:  # executor thread
        ls.call_soon(show, p)

    return on_progress


def describe_executor(s: ExecutorSettings) -> str:
    return {
        "local": f"local GPU{'s' if len(s.gpus) > 1 else ''} {','.join(map(str, s.gpus or (s.gpu,)))}",
        "remote": f"remote {s.url}",
        "ray": f"ray {s.ray_address or '(auto)'}",
        "test": "test (simulated GPU)",
    }[s.kind]


# ------------------------------------------------------------------------------------- runs


class Runs:
    """Runs in progress, verified rewrites waiting for the user, and the executor (event loop only,
    except :meth:`executor`, which background threads call)."""

    def __init__(self, ls: CudaLanguageServer) -> None:
        self.ls = ls
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="cuda-agent-run")
        self.active: dict[str, ActiveRun] = {}
        self.rewrites: dict[str, Rewrite] = {}
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

    def pending(self, od: OpenDocument, kernel: str) -> Rewrite | None:
        """The latest rewrite of ``kernel`` computed against exactly this text of the document."""
        found = [
            r
            for r in self.rewrites.values()
            if r.uri == od.uri and r.kernel == kernel and r.original == od.text
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


class Progress:
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


def _target(ls: CudaLanguageServer, od: OpenDocument, kernel: str) -> Target:
    if od.doc is None:
        raise TargetError(f"{od.path.name} is too large to analyse")
    return target_for(od.doc, kernel, compile_options(ls.settings, od.path))


def start_run(ls: CudaLanguageServer, kind: RunKind, od: OpenDocument, kernel: str) -> wire.RunStarted:
    """Start an optimize or benchmark run of ``kernel`` in the background; answer at once."""
    try:
        target = _target(ls, od, kernel)
    except TargetError as exc:
        return wire.RunStarted("", kind, StartStatus.ERROR, str(exc))
    if kind is RunKind.OPTIMIZE:
        return launch_run(
            ls, kind, od.uri, kernel, f"Optimizing {kernel}", lambda run, p: _optimize(ls, run, od, target, p)
        )
    return launch_run(
        ls, kind, od.uri, kernel, f"Benchmarking {kernel}", lambda run, p: _benchmark(ls, run, od, target, p)
    )


RunBody = Callable[["ActiveRun", "Progress"], Awaitable[wire.RunFinished]]


def launch_run(
    ls: CudaLanguageServer, kind: RunKind, uri: str, kernel: str, title: str, body: RunBody
) -> wire.RunStarted:
    """Run ``body`` in the background as ``kind`` on ``kernel`` (one run per kernel at a time),
    with progress titled ``title``; answer at once with the run id."""
    runs = ls.runs
    assert runs is not None
    busy = runs.running(uri, kernel)
    if busy is not None:
        return wire.RunStarted(
            busy.run_id, busy.kind, StartStatus.BUSY, f"{kernel} is already running ({busy.kind.value})"
        )
    run = ActiveRun(uuid.uuid4().hex[:12], kind, uri, kernel, threading.Event())
    runs.active[run.run_id] = run
    runs.changed()
    run.task = asyncio.ensure_future(_run(ls, run, title, body))
    return wire.RunStarted(run.run_id, kind, StartStatus.STARTED, title[0].lower() + title[1:])


def run_finished(run: ActiveRun, status: RunStatus, message: str, **numbers: Any) -> wire.RunFinished:
    values: dict[str, Any] = {
        "cancelled": run.cancel.is_set(),
        "rewrite_ready": False,
        **{k: 0.0 for k in ("speedup", "speedup_low", "speedup_high", "median_ms", "rel_spread")},
        "gbps": 0.0,
        "pct_peak": 0.0,
        "attempts": [],
        "simulated": False,
        **numbers,
    }
    return wire.RunFinished(run.run_id, run.kind, run.uri, run.kernel, status, message, **values)


async def _run(ls: CudaLanguageServer, run: ActiveRun, title: str, body: RunBody) -> None:
    """A run from start to end: progress, the work, the record, the ``runFinished`` notification."""
    runs = ls.runs
    assert runs is not None
    progress = Progress(ls, run, title)
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
    except ExecutorError as exc:
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


async def _optimize(
    ls: CudaLanguageServer, run: ActiveRun, od: OpenDocument, target: Target, progress: Progress
) -> wire.RunFinished:
    runs = ls.runs
    assert runs is not None and ls.loop is not None
    settings = ls.settings
    await progress.begin(f"{describe_executor(settings.executor)}: measuring the original")
    runs.status()

    def on_event(ev: loop.LoopEvent) -> None:  # loop thread
        ls.call_soon(show, ev)

    def show(ev: loop.LoopEvent) -> None:
        run.percent = int(100 * (ev.fraction or 0.0))
        best = f" · best {ev.best_speedup:.2f}× so far" if ev.best_speedup else ""
        now = f" · {ev.message}" if ev.kind == "evaluating" and ev.message else ""
        progress.report(
            run.percent, f"{plural(ev.evaluated, 'candidate')} tried{best}{now}", force=ev.kind == "improved"
        )
        runs.status()

    def work() -> loop.OptimizeResult:
        executor = runs.executor(settings.executor)
        proposer = make_proposer(settings, runs.compiler)
        b = settings.budget
        budget = OptimizeBudget(
            wall_s=b.seconds,
            candidates=b.candidates,
            tokens=b.tokens if settings.proposer.kind == "llm" else None,
        )
        try:
            return loop.optimize(
                target, proposer, executor, budget=budget, on_event=on_event, cancel=run.cancel
            )
        finally:
            proposer.close()

    result = await ls.loop.run_in_executor(runs.pool, work)
    return _record_optimize(ls, run, od, target, result)


def _record_optimize(
    ls: CudaLanguageServer,
    run: ActiveRun,
    od: OpenDocument,
    target: Target,
    result: loop.OptimizeResult,
) -> wire.RunFinished:
    runs = ls.runs
    assert runs is not None and od.doc is not None
    if result.device is not None:
        runs.device = result.device.name
    k = od.doc.kernel(run.kernel)
    original_hash = kernel_hash(od.doc, k) if k is not None else ""
    rewritten_hash = ""
    improved = result.outcome is loop.RunOutcome.IMPROVED and result.best is not None
    if improved:
        new_doc = Document(result.rewritten, str(od.path))
        nk = new_doc.kernel(run.kernel)
        rewritten_hash = kernel_hash(new_doc, nk) if nk is not None else text_hash(result.rewritten)
        runs.rewrites[run.run_id] = Rewrite(
            run.run_id,
            od.uri,
            od.version,
            run.kernel,
            target.text,
            result.rewritten,
            rewrite_edits(target, result),
            result.speedup,
            summary_of(result),
            result.best.proposal if result.best else None,
            result.simulated,
        )
    seeds = len({c.seed for c in result.best.result.checks}) if result.best else 0
    record = optimize_record(run.run_id, target, result, original_hash, rewritten_hash, seeds)
    ls.store.put(od.path, run.kernel, optimize=record)
    if improved:
        message = (
            f"{result.speedup:.2f}× faster, verified ({result.speedup_low:.2f}–{result.speedup_high:.2f}×)"
        )
    elif result.outcome is loop.RunOutcome.BASELINE_FAILED:
        message = str(result.stop)
    else:
        message = f"no reliably faster candidate ({verdict_summary(result.records)}; {result.stop})"
    if improved:
        message += f"; {verdict_summary(result.records)}"
    if result.cancelled:
        message += "; cancelled, best so far kept" if improved else "; cancelled"
    if result.simulated:
        message = f"{SIMULATED}: {message}"
    return run_finished(
        run,
        RunStatus.OK if improved else RunStatus(result.outcome.value),
        message,
        cancelled=result.cancelled,
        rewrite_ready=improved,
        speedup=result.speedup if improved else 0.0,
        speedup_low=result.speedup_low if improved else 0.0,
        speedup_high=result.speedup_high if improved else 0.0,
        attempts=[wire.AttemptRecord(**asdict(a)) for a in result.records],
        simulated=result.simulated,
    )


def _must_act(ls: CudaLanguageServer, message: str) -> None:
    """A pop-up: only for errors the user must act on (no GPU, unreachable worker, bad token)."""
    ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=message))


async def _benchmark(
    ls: CudaLanguageServer, run: ActiveRun, od: OpenDocument, target: Target, progress: Progress
) -> wire.RunFinished:
    runs = ls.runs
    assert runs is not None and ls.loop is not None
    settings = ls.settings
    await progress.begin(describe_executor(settings.executor))
    runs.status()
    request = target.request(run.run_id, ())

    def work() -> tuple[CandidateResult, DeviceInfo | None]:
        result = runs.executor(settings.executor).evaluate(request, cancel=run.cancel)
        return result.baseline, result.device

    baseline, info = await ls.loop.run_in_executor(runs.pool, work)
    device, simulated = (info.name, info.simulated) if info is not None else ("", False)
    runs.device = device or runs.device
    if baseline.timing is None:
        message = f"{baseline.status.value}: {target.located(baseline)}".strip(": ")
        return run_finished(run, RunStatus(baseline.status.value), message)
    record = benchmark_record(target, baseline, device, info)
    ls.store.put(od.path, run.kernel, benchmark=record)
    message = (
        f"{record.median_ms:.4g} ms ({spread_text(record.rel_spread)}) · {record.gbps:.0f} GB/s · "
        f"{record.pct_peak:.0f}% of peak"
    )
    return run_finished(
        run,
        RunStatus(baseline.status.value),
        f"{SIMULATED}: {message}" if simulated else message,
        simulated=simulated,
        median_ms=record.median_ms,
        rel_spread=record.rel_spread,
        gbps=record.gbps,
        pct_peak=record.pct_peak,
    )


async def apply_rewrite(ls: CudaLanguageServer, run_id: str) -> wire.ApplyResult:
    """The one apply path: the rewrite of ``run_id`` as one versioned, annotated workspace edit,
    refused when the document changed since the run began."""
    runs = ls.runs
    assert runs is not None
    rw = runs.rewrites.get(run_id)
    if rw is None:
        return wire.ApplyResult(
            False,
            ApplyReason.NO_REWRITE,
            f"no verified rewrite for run {run_id!r} (already applied, or the server restarted)",
        )
    od = ls.document(rw.uri)
    if od is None or od.text != rw.original:
        message = (
            f"Not applied: {rw.uri.rsplit('/', 1)[-1]} changed since the optimize run of {rw.kernel} began "
            "(or was closed). Nothing was overwritten; run Optimize again on the current code."
        )
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=message))
        return wire.ApplyResult(False, ApplyReason.STALE, message)
    label = f"{'Rewrite' if rw.simulated else 'Verified rewrite'} of {rw.kernel} ({rw.speedup_text})"
    edit = lsp.WorkspaceEdit(
        document_changes=[
            lsp.TextDocumentEdit(
                text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=od.uri, version=od.version),
                edits=[
                    lsp.AnnotatedTextEdit(annotation_id=wire.ANNOTATION, range=e.range, new_text=e.new_text)
                    for e in rw.edits
                ],
            )
        ],
        change_annotations={
            wire.ANNOTATION: lsp.ChangeAnnotation(
                label=label, needs_confirmation=True, description=rw.summary
            )
        },
    )
    result = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label=label))
    if result.applied:
        runs.rewrites.pop(run_id, None)
        runs.changed()
    return wire.ApplyResult.answered(result)


def rewrite_payload(ls: CudaLanguageServer, run_id: str) -> wire.Rewrite:
    rw = ls.runs.rewrites.get(run_id) if ls.runs is not None else None
    if rw is None:
        raise JsonRpcInvalidParams(f"no verified rewrite for run {run_id!r}")
    return wire.Rewrite(
        rw.run_id,
        rw.uri,
        rw.version,
        rw.kernel,
        rw.original,
        rw.rewritten,
        list(rw.edits),
        rw.speedup,
        rw.summary,
        rw.simulated,
    )


def results_payload(ls: CudaLanguageServer, uri: str | None) -> wire.Results:
    files = ls.store.all()
    if uri is not None:
        od = ls.document(uri)
        key = ls.store.key(od.path if od is not None else Path(to_fs_path(uri) or uri))
        files = {key: files.get(key, {})}
    return wire.Results(
        [
            wire.KernelResults(
                f,
                k,
                wire.camel_keys(to_dict(r.benchmark)) if r.benchmark is not None else None,
                wire.camel_keys(to_dict(r.optimize)) if r.optimize is not None else None,
                wire.camel_keys(to_dict(r.compare)) if r.compare is not None else None,
                wire.camel_keys(to_dict(r.profile)) if r.profile is not None else None,
            )
            for f, per_file in sorted(files.items())
            for k, r in sorted(per_file.items())
        ]
    )


def setup(ls: CudaLanguageServer) -> None:
    runs = Runs(ls)
    ls.runs = runs
    ls.on_stop.append(runs.close)
    ls.on_settings.append(lambda s: runs.status())

    @ls.command(wire.OPTIMIZE_COMMAND)
    async def optimize(ls: CudaLanguageServer, ref: wire.KernelRef) -> wire.RunStarted:
        od, k = ls.kernel_ref(ref)
        return start_run(ls, RunKind.OPTIMIZE, od, k.qualified_name)

    @ls.command(wire.BENCHMARK_COMMAND)
    async def benchmark(ls: CudaLanguageServer, ref: wire.KernelRef) -> wire.RunStarted:
        od, k = ls.kernel_ref(ref)
        return start_run(ls, RunKind.BENCHMARK, od, k.qualified_name)

    @ls.command(wire.CANCEL_COMMAND)
    def cancel(ls: CudaLanguageServer, ref: wire.RunRef) -> wire.CancelResult:
        assert ls.runs is not None
        return ls.runs.cancel(ref.run_id)

    @ls.command(wire.APPLY_REWRITE_COMMAND)
    async def apply(ls: CudaLanguageServer, ref: wire.RunRef) -> wire.ApplyResult:
        return await apply_rewrite(ls, ref.run_id)

    @ls.feature(wire.REWRITE_REQUEST)
    def rewrite(ls: CudaLanguageServer, params: wire.RunRef) -> wire.Rewrite:
        return rewrite_payload(ls, params.run_id)

    @ls.feature(wire.RESULTS_REQUEST)
    def results(ls: CudaLanguageServer, params: wire.ResultsParams) -> wire.Results:
        return results_payload(ls, params.uri)
