"""Make a program faster, from the editor (``cudaAgent.speedup``).

``cudaAgent.speedup`` ``[SpeedupRef]`` (the command "Make my program faster…") runs the flow of
:command:`cuda-agent speedup` (:func:`agent.program.speedup`, off the event loop in the runs'
thread pool, as a background run with work-done progress the user can cancel).  It answers
``RunStarted`` at once.  With a build command, the patched program is checked end to end on disk
(rebuilt, run, its outputs compared) and the files are restored byte for byte right after, so the
project is never left changed by the run itself; without one, the rewrites are verified kernel by
kernel only, and the message says so.  Then, when there is something to propose, ONE
``workspace/applyEdit``: every file's hunks as annotated edits, the annotation needing
confirmation (a client shows its refactor preview; VS Code's "Refactor Preview"), against the
files on disk.  A file open with unsaved changes is not edited behind the user's back: the run
ends with an error naming it.  Then ``cudaAgent/runFinished`` (kind ``speedup``): ``ok`` with the
kernels' shares, each rewrite's speedup and the end-to-end speedup measured against Amdahl's
prediction; ``not_improved`` when nothing faster could be applied; ``error`` when the patched
program's outputs differed (nothing proposed), it failed to build or run, or nothing was timed.

The program is the user's own, run with the user's rights, like the CLI (ARCHITECTURE.md, threat
model); nothing GPU-specific is imported here.  It runs where the CLI's would
(:func:`agent.program_remote.program_machine`): on the worker named in the user's or machine
settings (``cudaAgent.machine.executor.url`` and its token; a workspace's settings cannot name
one), the project uploaded and the outputs brought back, the run's cancel forwarded there; else
on this machine.
"""

from __future__ import annotations

import os
import re
from collections import defaultdict
from pathlib import Path

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path, to_fs_path

from agent import program as prog
from agent.outputs import OutputFile, OutputTolerance
from agent.program_remote import RemoteMachine, program_machine
from agent.proposers import make_proposer
from server import protocol as wire
from server.lsp import CudaLanguageServer
from server.protocol import RunKind, RunStatus
from server.runs import (
    ActiveRun,
    Plan,
    Report,
    RunProgress,
    Runs,
    RunType,
    add_run_type,
    run_finished,
    run_with_progress,
)
from server.settings import program_environment

ANNOTATION = wire.PROGRAM_ANNOTATION  # change annotation of the program's rewrites
PROGRAM = "(program)"  # the run's kernel name: a program has many

SIMULATED_PROGRAM_ENV = "CUDA_AGENT_TEST_PROGRAM"  # with executor.kind "test": agent.program_sim's table


def _settings(ls: CudaLanguageServer, ref: wire.SpeedupRef) -> prog.ProgramSettings:
    """The job the reference asks for; JsonRpcInvalidParams for bad arguments."""
    if not ref.command or not ref.command[0]:
        raise JsonRpcInvalidParams("command: give the program to run and its arguments")
    root = ls.workspace.root_path
    path = to_fs_path(ref.uri) if ref.uri.startswith("file:") else None
    base = Path(root) if root else Path(path).parent if path else None
    if base is None:
        raise JsonRpcInvalidParams(f"{ref.uri}: no workspace folder or file to run in")
    cwd = base / ref.cwd if ref.cwd else base
    if not cwd.is_dir():
        raise JsonRpcInvalidParams(f"cwd: {cwd} is not a folder")
    for pattern in ref.ignore:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise JsonRpcInvalidParams(f"ignore: {pattern!r} is not a regular expression ({exc})") from None
    try:
        outputs = tuple(OutputFile.parse(o) for o in ref.outputs)
    except ValueError as exc:
        raise JsonRpcInvalidParams(f"outputs: {exc}") from None
    if (
        ref.rtol < 0
        or ref.atol < 0
        or not 0 < ref.share <= 1
        or ref.top < 1
        or ref.budget_s <= 0
        or ref.runs < 1
    ):
        raise JsonRpcInvalidParams("rtol/atol >= 0, 0 < share <= 1, top >= 1, budgetS > 0, runs >= 1")
    return prog.ProgramSettings(
        argv=tuple(ref.command),
        cwd=str(cwd),
        sources=(str(base),),
        build=ref.build or "",
        outputs=outputs,
        tolerance=OutputTolerance(ref.rtol, ref.atol),
        ignore=tuple(ref.ignore),
        top=ref.top,
        share=ref.share,
        budget_s=ref.budget_s,
        runs=ref.runs,
        apply=bool(ref.build),
        keep=False,
    )


def _machine(ls: CudaLanguageServer, settings: prog.ProgramSettings) -> prog.Machine:
    """Where the program runs (:func:`agent.program_remote.program_machine`, as for the CLI): the
    GPU of the worker named in the user's or machine settings (``cudaAgent.machine.executor``,
    never a workspace's); else this machine's; the simulated program of the test executor
    (editor tests, demos)."""

    def local() -> prog.Machine:
        table = os.environ.get(SIMULATED_PROGRAM_ENV)
        if ls.settings.executor.kind == "test" and table:
            from agent.program_sim import SimulatedMachine, load_kernels

            return SimulatedMachine(load_kernels(table), settings.sources)
        return prog.LocalMachine(program_environment(ls.settings))  # none of our secrets

    return program_machine(ls.settings.executor, settings, local)


def plan_speedup(ls: CudaLanguageServer, ref: wire.SpeedupRef) -> Plan:
    settings = _settings(ls, ref)
    program = Path(ref.command[0]).name
    return Plan(
        ref.uri,
        PROGRAM,
        f"Making {program} faster",
        lambda run, progress: _speedup(ls, run, settings, progress),
    )


async def _speedup(
    ls: CudaLanguageServer, run: ActiveRun, settings: prog.ProgramSettings, progress: RunProgress
) -> wire.RunFinished:
    runs = ls.need(Runs)
    config = ls.settings

    def work(report: Report) -> prog.ProgramReport:
        executor = runs.executor(config.executor)
        machine = _machine(ls, settings)
        p = config.proposer
        try:
            return prog.speedup(
                settings,
                machine,
                executor,
                lambda: make_proposer(p.kind, p.llm() if p.kind == "llm" else None, runs.compiler),
                progress=lambda step: report(0, step.message, True),
                cancel=run.cancel,
            )
        finally:
            if isinstance(machine, RemoteMachine):
                machine.close()

    try:
        report = await run_with_progress(ls, run, progress, f"running {' '.join(settings.argv)}", work)
    except prog.Cancelled:
        return run_finished(run, RunStatus.ERROR, "cancelled; no file changed")
    except Exception as exc:  # the program not found, capture unavailable, no GPU: one line
        return run_finished(run, RunStatus.ERROR, f"{type(exc).__name__}: {exc}")
    summary = summarize(report)
    if report.outcome.failed:
        return run_finished(run, RunStatus.ERROR, summary)
    if not report.edits:
        return run_finished(run, RunStatus.NOT_IMPROVED, summary)
    dirty = _unsaved(ls, report.files)
    if dirty:
        return run_finished(
            run, RunStatus.ERROR, f"{summary}; not proposed: unsaved changes in {', '.join(dirty)}"
        )
    applied = await ls.workspace_apply_edit_async(
        lsp.ApplyWorkspaceEditParams(edit=workspace_edit(report), label=_label(report))
    )
    told = "edit applied" if applied.applied else f"edit not applied ({applied.failure_reason or 'declined'})"
    return run_finished(run, RunStatus.OK, f"{summary}; {told}")


def _unsaved(ls: CudaLanguageServer, files: tuple[str, ...]) -> list[str]:
    """Files of the patch open in the editor with text that differs from the disk."""
    out = []
    for od in ls.documents.values():
        if od.path is None or str(od.path) not in files or od.doc is None:
            continue
        try:
            disk = Path(od.path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if disk != od.doc.text:
            out.append(Path(od.path).name)
    return out


def _label(report: prog.ProgramReport) -> str:
    n = len([r for r in report.rewrites if r.applied])
    return f"CUDA Agent: {n} kernel rewrite(s) in {len(report.files)} file(s)"


def workspace_edit(report: prog.ProgramReport) -> lsp.WorkspaceEdit:
    """The patch as one workspace edit: each file's hunks, annotated as needing confirmation."""
    per_file: dict[str, list[prog.FileEdit]] = defaultdict(list)
    for e in report.edits:
        per_file[e.path].append(e)
    changes = []
    for path, edits in per_file.items():
        uri = from_fs_path(path) or Path(path).as_uri()
        changes.append(
            lsp.TextDocumentEdit(
                text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None),
                edits=[
                    lsp.AnnotatedTextEdit(
                        annotation_id=ANNOTATION,
                        range=lsp.Range(lsp.Position(e.start, 0), lsp.Position(e.end, 0)),
                        new_text=e.new_text,
                    )
                    for e in edits
                ],
            )
        )
    applied = [r for r in report.rewrites if r.applied]
    description = "; ".join(f"{r.kernel.split('(')[0]}: {r.speedup:.2f}x" for r in applied)
    return lsp.WorkspaceEdit(
        document_changes=changes,
        change_annotations={
            ANNOTATION: lsp.ChangeAnnotation(
                label=_label(report), needs_confirmation=True, description=description
            )
        },
    )


def summarize(r: prog.ProgramReport) -> str:
    """One paragraph: kernels by share, each rewrite, predicted vs measured, the verdict."""
    parts = []
    shares = ", ".join(f"{k.kernel.split('(')[0]} {k.share:.0%}" for k in r.kernels[:5])
    if shares:
        parts.append(f"GPU time: {shares}")
    for w in r.rewrites:
        name = w.kernel.split("(")[0]
        if w.applied:
            parts.append(f"{name}: {w.speedup:.2f}x [{w.speedup_low:.2f}, {w.speedup_high:.2f}]")
        else:
            parts.append(f"{name} refused: {w.reason}")
    if r.edits:
        parts.append(f"predicted {r.predicted:.3f}x end to end (Amdahl)")
    if r.compared_equal:
        low, high = r.measured_range
        parts.append(f"measured {r.measured:.3f}x [{low:.3f}, {high:.3f}], outputs equal")
    elif r.edits and r.outcome is prog.Outcome.PATCH_ONLY:
        parts.append("not checked end to end (no build command)")
    for d in r.differences[:3]:
        parts.append(f"differs: {d}")
    parts.append(r.message)
    return "; ".join(parts)


def setup(ls: CudaLanguageServer) -> None:
    add_run_type(ls, RunType(RunKind.SPEEDUP, wire.SPEEDUP_COMMAND, wire.SpeedupRef, plan_speedup))
