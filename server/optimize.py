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

import logging
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import to_fs_path

from agent import loop
from agent.attempts import verdict_summary
from agent.proposer import OptimizeBudget, Proposer
from agent.source import Document
from agent.target import Target, TargetError, target_for
from sandbox.compile_pool import CompilePool
from sandbox.contract import CandidateResult, DeviceInfo, Tolerance, to_dict
from server import protocol as wire
from server.diagnostics import compile_options
from server.lsp import CudaLanguageServer, OpenDocument
from server.protocol import ApplyReason, RunKind, RunStatus, StartStatus
from server.runs import (
    ActiveRun,
    Progress,
    Report,
    Rewrite,
    Runs,
    describe_executor,
    launch_run,
    record_date,
    run_finished,
    run_with_progress,
)
from server.settings import LLM_URL_ENV, SECTION, Settings
from server.store import BenchmarkRecord, OptimizeRecord, Roofline, kernel_hash, text_hash
from server.texts import SIMULATED, plural, spread_text

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------- values


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
        date=record_date(),
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
        date=record_date(),
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
        from agent.llm import EndpointError, LLMProposer, LLMSettings

        if not p.endpoint and not os.environ.get(LLM_URL_ENV):  # the key goes only where it was set beside
            raise EndpointError(
                f"the llm proposer has no endpoint: set {SECTION}.proposer.endpoint in your user settings "
                f"(a workspace cannot choose where the API key is sent) or {LLM_URL_ENV}"
            )
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


# ------------------------------------------------------------------------------------- runs


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


async def _optimize(
    ls: CudaLanguageServer, run: ActiveRun, od: OpenDocument, target: Target, progress: Progress
) -> wire.RunFinished:
    runs = ls.need(Runs)
    settings = ls.settings

    def work(report: Report) -> loop.OptimizeResult:
        def on_event(ev: loop.LoopEvent) -> None:
            best = f" · best {ev.best_speedup:.2f}× so far" if ev.best_speedup else ""
            now = f" · {ev.message}" if ev.kind == "evaluating" and ev.message else ""
            told = f"{plural(ev.evaluated, 'candidate')} tried{best}{now}"
            report(int(100 * (ev.fraction or 0.0)), told, ev.kind == "improved")

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

    begin = f"{describe_executor(settings.executor)}: measuring the original"
    result = await run_with_progress(ls, run, progress, begin, work)
    return _record_optimize(ls, run, od, target, result)


def _record_optimize(
    ls: CudaLanguageServer,
    run: ActiveRun,
    od: OpenDocument,
    target: Target,
    result: loop.OptimizeResult,
) -> wire.RunFinished:
    runs = ls.need(Runs)
    assert od.doc is not None
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
        message = f"no reliably faster candidate ({verdict_summary(result.records)}; {result.stop!s})"
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


async def _benchmark(
    ls: CudaLanguageServer, run: ActiveRun, od: OpenDocument, target: Target, progress: Progress
) -> wire.RunFinished:
    runs = ls.need(Runs)
    settings = ls.settings
    request = target.request(run.run_id, ())

    def work(report: Report) -> tuple[CandidateResult, DeviceInfo | None]:
        result = runs.executor(settings.executor).evaluate(request, cancel=run.cancel)
        return result.baseline, result.device

    baseline, info = await run_with_progress(ls, run, progress, describe_executor(settings.executor), work)
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
    runs = ls.need(Runs)
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
    runs = ls.part(Runs)
    rw = runs.rewrites.get(run_id) if runs is not None else None
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
                wire.row(wire.BenchmarkRow, to_dict(r.benchmark)) if r.benchmark is not None else None,
                wire.row(wire.OptimizeRow, to_dict(r.optimize)) if r.optimize is not None else None,
                wire.row(wire.CompareRow, to_dict(r.compare)) if r.compare is not None else None,
                wire.row(wire.ProfileRow, to_dict(r.profile)) if r.profile is not None else None,
            )
            for f, per_file in sorted(files.items())
            for k, r in sorted(per_file.items())
        ]
    )


def setup(ls: CudaLanguageServer) -> None:
    @ls.command(wire.OPTIMIZE_COMMAND)
    async def optimize(ls: CudaLanguageServer, ref: wire.KernelRef) -> wire.RunStarted:
        od, k = ls.kernel_ref(ref)
        return start_run(ls, RunKind.OPTIMIZE, od, k.qualified_name)

    @ls.command(wire.BENCHMARK_COMMAND)
    async def benchmark(ls: CudaLanguageServer, ref: wire.KernelRef) -> wire.RunStarted:
        od, k = ls.kernel_ref(ref)
        return start_run(ls, RunKind.BENCHMARK, od, k.qualified_name)

    @ls.command(wire.APPLY_REWRITE_COMMAND)
    async def apply(ls: CudaLanguageServer, ref: wire.RunRef) -> wire.ApplyResult:
        return await apply_rewrite(ls, ref.run_id)

    @ls.feature(wire.REWRITE_REQUEST)
    def rewrite(ls: CudaLanguageServer, params: wire.RunRef) -> wire.Rewrite:
        return rewrite_payload(ls, params.run_id)

    @ls.feature(wire.RESULTS_REQUEST)
    def results(ls: CudaLanguageServer, params: wire.ResultsParams) -> wire.Results:
        return results_payload(ls, params.uri)
