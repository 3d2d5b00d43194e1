"""Optimize and benchmark from the editor; verified rewrites offered for confirmation.

Commands (``workspace/executeCommand``) and custom methods, as listed in ARCHITECTURE.md:

- ``cudaAgent.optimize`` ``[{uri, kernel}]``: runs :func:`agent.loop.optimize` in a background
  thread through the configured executor, with server-initiated work-done progress (percentage,
  candidates tried, best speedup so far) that the user can cancel.  The best verified candidate
  so far is kept on cancel.  Answers ``{runId, status, speedup, message, cancelled}``; ``status``
  is ``ok`` when a verified rewrite is ready (fetch it with ``cudaAgent/rewrite``), else
  ``not_improved``, ``baseline_failed``, ``error`` or ``busy``.
- ``cudaAgent.benchmark`` ``[{uri, kernel}]``: times the kernel under its spec.
- ``cudaAgent.applyRewrite`` ``[{runId}]``: sends the rewrite (kernel and launch-site edits) as one
  ``workspace/applyEdit`` whose change annotation needs confirmation, against the exact document
  version; refused, with a message, if the document changed since the run began.
- ``cudaAgent/rewrite`` ``{runId}``: the rewrite for a side-by-side diff.
- ``cudaAgent/results`` ``{uri?}``: stored results.
- ``cudaAgent/status`` (server → client): executor, device, the run in progress.

Each finished run is recorded in the workspace's result store; lenses and hints refresh.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from agent import loop
from agent.source import Document
from sandbox.compiler import CompilePool
from sandbox.contract import CandidateResult, Tolerance, to_dict
from sandbox.executor import Executor, ExecutorError
from server.diagnostics import compile_options
from server.lsp import CudaLanguageServer, OpenDocument
from server.settings import ExecutorSettings, Settings, make_executor
from server.store import BenchmarkRecord, OptimizeRecord, kernel_hash, text_hash
from server.texts import plural

log = logging.getLogger(__name__)

ANNOTATION = "cuda-agent.verified-rewrite"
STATUS = "cudaAgent/status"


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


@dataclass
class ActiveRun:
    """A run in progress (event loop only)."""

    run_id: str
    kind: Literal["optimize", "benchmark", "compare"]
    uri: str
    kernel: str
    cancel: threading.Event
    percent: int = 0


def position_at(text: str, offset: int) -> lsp.Position:
    """The LSP position (UTF-16 columns) of a character offset into ``text``."""
    line = text.count("\n", 0, offset)
    start = text.rfind("\n", 0, offset) + 1
    prefix = text[start:offset]
    return lsp.Position(line, len(prefix.encode("utf-16-le")) // 2)


def rewrite_edits(target: loop.Target, result: loop.OptimizeResult) -> tuple[lsp.TextEdit, ...]:
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
        return result.stop_reason
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


def optimize_record(
    run_id: str,
    target: loop.Target,
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
        stop_reason=result.stop_reason,
        original_hash=original_hash,
        rewritten_hash=rewritten_hash,
        launch_todo=result.launch_todo,
    )


def benchmark_record(target: loop.Target, r: CandidateResult, device: str) -> BenchmarkRecord:
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
    )


# ------------------------------------------------------------------------------------- factories


def make_proposer(settings: Settings, compiler: Callable[[], CompilePool]) -> loop.Proposer:
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
        self.generation = 0  # bumped when the set of pending rewrites changes
        self.device = ""
        self._lock = threading.Lock()
        self._executor: tuple[ExecutorSettings, Executor] | None = None
        self._compiler: CompilePool | None = None

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

    def add_rewrite(self, rewrite: Rewrite) -> None:
        self.rewrites[rewrite.run_id] = rewrite
        self.generation += 1

    def status(self) -> None:
        if not self.ls.ready:
            return
        run = next(iter(self.active.values()), None)
        s = self.ls.settings.executor
        self.ls.protocol.notify(
            STATUS,
            {
                "executor": describe_executor(s),
                "device": self.device,
                "running": {"kernel": run.kernel, "kind": run.kind, "percent": run.percent} if run else None,
            },
        )

    async def cancel_all(self, timeout_s: float) -> None:
        """Cancel every run and wait (up to ``timeout_s``) until each has answered its request."""
        for run in self.active.values():
            run.cancel.set()
        deadline = time.monotonic() + timeout_s
        while self.active and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    def close(self) -> None:
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
    """Server-initiated work-done progress with cancel (a no-op when the client has none)."""

    def __init__(self, ls: CudaLanguageServer, cancel: threading.Event) -> None:
        self.ls = ls
        self.cancel = cancel
        self.token = f"cuda-agent/{uuid.uuid4().hex[:12]}"
        self.enabled = False
        self.last = 0.0

    async def begin(self, title: str, message: str) -> None:
        window = self.ls.client_capabilities.window
        if window is None or not window.work_done_progress:
            return
        try:
            await self.ls.work_done_progress.create_async(self.token)
        except Exception as exc:
            log.info("no progress bar: %s", exc)
            return
        self.enabled = True
        self.ls.work_done_progress.begin(
            self.token,
            lsp.WorkDoneProgressBegin(title=title, message=message, percentage=0, cancellable=True),
        )
        # pygls cancels this future on window/workDoneProgress/cancel
        self.ls.work_done_progress.tokens[self.token].add_done_callback(lambda _: self.cancel.set())

    def report(self, percent: int, message: str, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < 0.1):
            return
        self.last = now
        self.ls.work_done_progress.report(
            self.token, lsp.WorkDoneProgressReport(message=message, percentage=percent)
        )

    def end(self, message: str) -> None:
        if self.enabled:
            self.ls.work_done_progress.end(self.token, lsp.WorkDoneProgressEnd(message=message))
            self.ls.work_done_progress.tokens.pop(self.token, None)
            self.enabled = False


def _cancel_with_request(ls: CudaLanguageServer, cancel: threading.Event) -> None:
    """Set ``cancel`` when the client cancels the request being handled (``$/cancelRequest``).

    pygls runs a command inside its own ``workspace/executeCommand`` handler and cancels only that
    outer request's future; the command's coroutine is not told, so watch that future."""
    outer = ls.protocol._request_futures.get(ls.protocol.msg_id) if ls.protocol.msg_id is not None else None
    if outer is not None:
        outer.add_done_callback(lambda f: cancel.set() if f.cancelled() else None)


def _target(ls: CudaLanguageServer, od: OpenDocument, kernel: str) -> loop.Target:
    if od.doc is None:
        raise loop.TargetError(f"{od.path.name} is too large to analyse")
    return loop.target_for(od.doc, kernel, compile_options(ls.settings, od.path))


async def run_optimize(ls: CudaLanguageServer, od: OpenDocument, kernel: str) -> dict[str, Any]:
    runs = ls.runs
    assert runs is not None and ls.loop is not None
    busy = next((r for r in runs.active.values() if r.uri == od.uri and r.kernel == kernel), None)
    if busy is not None:
        return {
            "runId": busy.run_id,
            "status": "busy",
            "speedup": 0.0,
            "message": f"{kernel} is already running",
        }
    try:
        target = _target(ls, od, kernel)
    except loop.TargetError as exc:
        return {"runId": "", "status": "error", "speedup": 0.0, "message": str(exc)}
    settings = ls.settings
    run = ActiveRun(uuid.uuid4().hex[:12], "optimize", od.uri, kernel, threading.Event())
    runs.active[run.run_id] = run
    _cancel_with_request(ls, run.cancel)
    progress = Progress(ls, run.cancel)
    await progress.begin(
        f"Optimizing {kernel}", f"{describe_executor(settings.executor)}: measuring the original"
    )
    runs.status()

    def on_event(ev: loop.LoopEvent) -> None:  # loop thread
        ls.call_soon(show, ev)

    def show(ev: loop.LoopEvent) -> None:
        run.percent = int(100 * (ev.fraction or 0.0))
        best = f" · best {ev.best_speedup:.2f}× so far" if ev.best_speedup else ""
        progress.report(
            run.percent, f"{plural(ev.evaluated, 'candidate')} tried{best}", force=ev.kind == "improved"
        )
        runs.status()

    def work() -> loop.OptimizeResult:
        executor = runs.executor(settings.executor)
        proposer = make_proposer(settings, runs.compiler)
        b = settings.budget
        budget = loop.OptimizeBudget(
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

    future = ls.loop.run_in_executor(runs.pool, work)
    try:
        result = await asyncio.shield(future)
    except asyncio.CancelledError:  # the handler itself was cancelled: stop the run, keep what it found
        run.cancel.set()
        future.add_done_callback(lambda f: _finish_optimize(ls, run, od, target, f, progress))
        raise
    except ExecutorError as exc:
        _end(ls, run, progress, f"failed: {exc}")
        _must_act(ls, f"CUDA Agent: cannot optimize {kernel}: {exc}")
        return {"runId": run.run_id, "status": "error", "speedup": 0.0, "message": str(exc)}
    except Exception as exc:
        _end(ls, run, progress, f"failed: {exc}")
        log.exception("optimize %s failed", kernel)
        return {"runId": run.run_id, "status": "error", "speedup": 0.0, "message": str(exc)}
    return _record_optimize(ls, run, od, target, result, progress)


def _finish_optimize(
    ls: CudaLanguageServer,
    run: ActiveRun,
    od: OpenDocument,
    target: loop.Target,
    future: asyncio.Future[loop.OptimizeResult],
    progress: Progress,
) -> None:
    if future.cancelled() or future.exception() is not None:
        _end(ls, run, progress, "cancelled")
        return
    _record_optimize(ls, run, od, target, future.result(), progress)


def _record_optimize(
    ls: CudaLanguageServer,
    run: ActiveRun,
    od: OpenDocument,
    target: loop.Target,
    result: loop.OptimizeResult,
    progress: Progress,
) -> dict[str, Any]:
    runs = ls.runs
    assert runs is not None and od.doc is not None
    if result.device is not None:
        runs.device = result.device.name
    k = od.doc.kernel(run.kernel)
    original_hash = kernel_hash(od.doc, k) if k is not None else ""
    rewritten_hash = ""
    improved = result.outcome is loop.Outcome.IMPROVED and result.best is not None
    if improved:
        new_doc = Document(result.rewritten, str(od.path))
        nk = new_doc.kernel(run.kernel)
        rewritten_hash = kernel_hash(new_doc, nk) if nk is not None else text_hash(result.rewritten)
        runs.add_rewrite(
            Rewrite(
                run.run_id,
                od.uri,
                od.version,
                run.kernel,
                target.text,
                result.rewritten,
                rewrite_edits(target, result),
                result.speedup,
                summary_of(result),
            )
        )
    seeds = len({c.seed for c in result.best.result.checks}) if result.best else 0
    record = optimize_record(run.run_id, target, result, original_hash, rewritten_hash, seeds)
    ls.store.put(od.path, run.kernel, optimize=record)
    ls.results_changed()
    if improved:
        message = (
            f"{result.speedup:.2f}× faster, verified ({result.speedup_low:.2f}–{result.speedup_high:.2f}×)"
        )
    elif result.outcome is loop.Outcome.BASELINE_FAILED:
        message = result.stop_reason
    else:
        message = f"no reliably faster candidate ({plural(result.attempts, 'candidate')} tried; {result.stop_reason})"
    if result.cancelled:
        message += "; cancelled, best so far kept"
    _end(ls, run, progress, message)
    log.info("optimize %s: %s", run.kernel, message)
    return {
        "runId": run.run_id,
        "status": "ok" if improved else result.outcome.value,
        "speedup": result.speedup if improved else 0.0,
        "message": message,
        "cancelled": result.cancelled,
    }


def _end(ls: CudaLanguageServer, run: ActiveRun, progress: Progress, message: str) -> None:
    progress.end(message)
    if ls.runs is not None:
        ls.runs.active.pop(run.run_id, None)
        ls.runs.status()


def _must_act(ls: CudaLanguageServer, message: str) -> None:
    """A pop-up: only for errors the user must act on (no GPU, unreachable worker, bad token)."""
    ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Error, message=message))


async def run_benchmark(ls: CudaLanguageServer, od: OpenDocument, kernel: str) -> dict[str, Any]:
    runs = ls.runs
    assert runs is not None and ls.loop is not None
    empty = {"status": "error", "medianMs": 0.0, "relSpread": 0.0, "gbps": 0.0, "pctPeak": 0.0}
    try:
        target = _target(ls, od, kernel)
    except loop.TargetError as exc:
        return {**empty, "message": str(exc)}
    settings = ls.settings
    run = ActiveRun(uuid.uuid4().hex[:12], "benchmark", od.uri, kernel, threading.Event())
    runs.active[run.run_id] = run
    _cancel_with_request(ls, run.cancel)
    progress = Progress(ls, run.cancel)
    await progress.begin(f"Benchmarking {kernel}", describe_executor(settings.executor))
    runs.status()
    request = target.request(run.run_id, ())

    def work() -> tuple[CandidateResult, str]:
        result = runs.executor(settings.executor).evaluate(request, cancel=run.cancel)
        return result.baseline, result.device.name if result.device else ""

    try:
        baseline, device = await ls.loop.run_in_executor(runs.pool, work)
    except ExecutorError as exc:
        _end(ls, run, progress, f"failed: {exc}")
        _must_act(ls, f"CUDA Agent: cannot benchmark {kernel}: {exc}")
        return {**empty, "message": str(exc)}
    except BaseException:  # cancelled request, or a bug: the bar must not stay up
        run.cancel.set()
        _end(ls, run, progress, "cancelled")
        raise
    runs.device = device or runs.device
    if baseline.timing is None:
        message = f"{baseline.status.value}: {baseline.message}".strip(": ")
        _end(ls, run, progress, message)
        return {**empty, "status": baseline.status.value, "message": message}
    record = benchmark_record(target, baseline, device)
    ls.store.put(od.path, kernel, benchmark=record)
    ls.results_changed()
    message = f"{record.median_ms:.4g} ms · {record.gbps:.0f} GB/s · {record.pct_peak:.0f}% of peak"
    _end(ls, run, progress, message)
    return {
        "status": baseline.status.value,
        "medianMs": record.median_ms,
        "relSpread": record.rel_spread,
        "gbps": record.gbps,
        "pctPeak": record.pct_peak,
        "message": message,
    }


async def apply_rewrite(ls: CudaLanguageServer, run_id: str) -> dict[str, Any]:
    runs = ls.runs
    assert runs is not None
    rw = runs.rewrites.get(run_id)
    if rw is None:
        raise JsonRpcInvalidParams(f"no verified rewrite for run {run_id!r}")
    od = ls.document(rw.uri)
    if od is None or od.text != rw.original:
        message = (
            f"Not applied: {rw.uri.rsplit('/', 1)[-1]} changed since the optimize run of {rw.kernel} began "
            "(or was closed). Nothing was overwritten; run Optimize again on the current code."
        )
        ls.window_show_message(lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=message))
        return {"applied": False, "message": message}
    label = f"Verified rewrite of {rw.kernel} ({rw.speedup:.2f}× faster)"
    edit = lsp.WorkspaceEdit(
        document_changes=[
            lsp.TextDocumentEdit(
                text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=od.uri, version=od.version),
                edits=[
                    lsp.AnnotatedTextEdit(annotation_id=ANNOTATION, range=e.range, new_text=e.new_text)
                    for e in rw.edits
                ],
            )
        ],
        change_annotations={
            ANNOTATION: lsp.ChangeAnnotation(label=label, needs_confirmation=True, description=rw.summary)
        },
    )
    result = await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label=label))
    if result.applied:
        runs.rewrites.pop(run_id, None)
        runs.generation += 1
    return {
        "applied": result.applied,
        "message": result.failure_reason or ("applied" if result.applied else "declined"),
    }


def rewrite_payload(ls: CudaLanguageServer, params: Any) -> dict[str, Any]:
    run_id = _field(params, "runId")
    rw = ls.runs.rewrites.get(run_id) if ls.runs is not None and isinstance(run_id, str) else None
    if rw is None:
        raise JsonRpcInvalidParams(f"no verified rewrite for run {run_id!r}")
    return {
        "uri": rw.uri,
        "version": rw.version,
        "kernel": rw.kernel,
        "original": rw.original,
        "rewritten": rw.rewritten,
        "edits": [{"range": _range_json(e.range), "newText": e.new_text} for e in rw.edits],
        "speedup": rw.speedup,
        "summary": rw.summary,
    }


def results_payload(ls: CudaLanguageServer, params: Any) -> dict[str, Any]:
    uri = _field(params, "uri")
    if uri is not None and not isinstance(uri, str):
        raise JsonRpcInvalidParams("uri must be a string")
    files = ls.store.all()
    if uri is not None:
        od = ls.document(uri)
        key = ls.store.key(od.path if od is not None else Path(to_fs_path(uri) or uri))
        files = {key: files.get(key, {})}
    return {
        "results": [
            {"file": f, "kernel": k, **to_dict(r)}
            for f, per_file in sorted(files.items())
            for k, r in sorted(per_file.items())
        ]
    }


def _field(params: Any, name: str) -> Any:
    if isinstance(params, dict):
        return params.get(name)
    return getattr(params, name, None)


def _range_json(r: lsp.Range) -> dict[str, Any]:
    return {
        "start": {"line": r.start.line, "character": r.start.character},
        "end": {"line": r.end.line, "character": r.end.character},
    }


def _run_id(args: tuple[Any, ...]) -> str:
    arg = args[0] if len(args) == 1 else None
    run_id = arg.get("runId") if isinstance(arg, dict) else None
    if not isinstance(run_id, str):
        raise JsonRpcInvalidParams("expected one argument {runId}")
    return run_id


def setup(ls: CudaLanguageServer) -> None:
    runs = Runs(ls)
    ls.runs = runs
    ls.on_stop.append(runs.close)
    ls.on_settings.append(lambda s: runs.status())

    @ls.command("cudaAgent.optimize")
    async def optimize(ls: CudaLanguageServer, *args: Any) -> dict[str, Any]:
        od, k = ls.kernel_arg(args)
        return await run_optimize(ls, od, k.qualified_name)

    @ls.command("cudaAgent.benchmark")
    async def benchmark(ls: CudaLanguageServer, *args: Any) -> dict[str, Any]:
        od, k = ls.kernel_arg(args)
        return await run_benchmark(ls, od, k.qualified_name)

    @ls.command("cudaAgent.applyRewrite")
    async def apply(ls: CudaLanguageServer, *args: Any) -> dict[str, Any]:
        return await apply_rewrite(ls, _run_id(args))

    @ls.feature("cudaAgent/rewrite")
    def rewrite(ls: CudaLanguageServer, params: Any) -> dict[str, Any]:
        return rewrite_payload(ls, params)

    @ls.feature("cudaAgent/results")
    def results(ls: CudaLanguageServer, params: Any) -> dict[str, Any]:
        return results_payload(ls, params)
