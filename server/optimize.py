"""Optimize from the editor: a search for a faster verified rewrite of a kernel, offered for confirmation.

``cudaAgent.optimize`` ``[KernelRef]`` (declared in :mod:`server.protocol`; a row of the run
table, :mod:`server.runs`) answers at once with a :class:`~server.protocol.RunStarted` (the run
id); the run goes on in a background thread through the configured executor, with progress the
user can cancel (the best verified candidate so far is kept).  The end: a ``cudaAgent/runFinished``
notification carrying the run's :class:`~agent.records.OptimizeRecord` (the one stored); a
verified faster rewrite then waits in the runs (:class:`server.runs.PendingRewrite`),
offered as an **Apply** code lens and code action on the kernel (:mod:`server.rewrites` applies
it).  Each finished run is recorded in the workspace's result store; lenses and hints refresh.
"""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

from agent import loop
from agent.attempts import verdict_summary
from agent.proposer import OptimizeBudget
from agent.proposers import make_proposer
from agent.records import kernel_hash, optimize_record, rewrite_summary, text_hash
from agent.target import Target
from cudasrc.source import Document
from server import protocol as wire
from server.lsp import CudaLanguageServer, OpenDocument
from server.protocol import RunKind, RunStatus
from server.runs import (
    ActiveRun,
    PendingRewrite,
    Plan,
    Report,
    RunProgress,
    Runs,
    RunType,
    add_run_type,
    run_finished,
    run_with_progress,
    target_of,
)
from server.texts import SIMULATED, describe_executor, plural

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


# ------------------------------------------------------------------------------------- the run


def plan_optimize(ls: CudaLanguageServer, ref: wire.KernelRef) -> Plan:
    """Search for a faster verified rewrite of the kernel."""
    od, k = ls.kernel_ref(ref)
    target = target_of(ls, od, k.qualified_name)
    return Plan(
        od.uri,
        k.qualified_name,
        f"Optimizing {k.qualified_name}",
        lambda run, p: _optimize(ls, run, od, target, p),
    )


async def _optimize(
    ls: CudaLanguageServer, run: ActiveRun, od: OpenDocument, target: Target, progress: RunProgress
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
        p = settings.proposer
        proposer = make_proposer(p.kind, p.llm() if p.kind == "llm" else None, runs.compiler)
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
        rewrite = wire.Rewrite(
            run.run_id,
            od.uri,
            od.version,
            run.kernel,
            target.text,
            result.rewritten,
            result.speedup,
            rewrite_summary(result),
            result.simulated,
        )
        proposal = result.best.proposal if result.best else None
        runs.rewrites[run.run_id] = PendingRewrite(rewrite, rewrite_edits(target, result), proposal)
    record = optimize_record(run.run_id, target, result, original_hash, rewritten_hash)
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
        simulated=result.simulated,
        optimize=record,
    )


def setup(ls: CudaLanguageServer) -> None:
    add_run_type(ls, RunType(RunKind.OPTIMIZE, wire.OPTIMIZE_COMMAND, wire.KernelRef, plan_optimize))
