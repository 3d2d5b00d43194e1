"""Optimize from the editor: a search for a faster verified rewrite of a kernel, offered for confirmation.

``cudaAgent.optimize`` ``[KernelRef]`` (declared in :mod:`server.protocol`; a row of the run
table, :mod:`server.runs`) answers at once with a :class:`~server.protocol.RunStarted` (the run
id); the run goes on in a background thread through the configured executor, with progress the
user can cancel (the best verified candidate so far is kept).  The end: a ``cudaAgent/runFinished``
notification; a verified faster rewrite then waits in the runs (:class:`server.runs.Rewrite`),
offered as an **Apply** code lens and code action on the kernel (:mod:`server.rewrites` applies
it).  Each finished run is recorded in the workspace's result store; lenses and hints refresh.
"""

from __future__ import annotations

import logging
from dataclasses import asdict

from lsprotocol import types as lsp

from agent import loop
from agent.attempts import verdict_summary
from agent.proposer import OptimizeBudget
from agent.proposers import make_proposer
from agent.target import Target
from cudasrc.source import Document
from sandbox.contract import Tolerance
from server import protocol as wire
from server.lsp import CudaLanguageServer, OpenDocument
from server.protocol import RunKind, RunStatus
from server.runs import (
    ActiveRun,
    Plan,
    Report,
    Rewrite,
    RunProgress,
    Runs,
    RunType,
    add_run_type,
    record_date,
    run_finished,
    run_with_progress,
    target_of,
)
from server.store import OptimizeRecord, kernel_hash, roofline, text_hash
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


def setup(ls: CudaLanguageServer) -> None:
    add_run_type(ls, RunType(RunKind.OPTIMIZE, wire.OPTIMIZE_COMMAND, wire.KernelRef, plan_optimize))
