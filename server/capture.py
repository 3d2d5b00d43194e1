"""Capture a spec from a run, from the editor (``cudaAgent.capture``).

``cudaAgent.capture`` ``[CaptureRef]`` (the command "Capture spec from a run…") runs the user's
program as :command:`cuda-agent capture` does (:func:`sandbox.capture.run_program`, off the event
loop in the runs' thread pool, as a background run with progress the user can cancel), with no
input (the server's stdin is the protocol stream) and its output in the server's log.  It answers
``RunStarted`` at once.  When the program ends, the spec of the first recorded launch of ``kernel``
(left out: of the first launched kernel defined under the workspace folder, ``uri``'s file first)
goes to the client as one ``workspace/applyEdit`` against that file (its open version, else the
file on disk), annotated as needing confirmation; nothing is saved here.  Then
``cudaAgent/runFinished`` (kind ``capture``): ``ok`` with the launch and what was applied, or
``error`` with the reason (the program not found or failed, nothing captured, the launch's kernel
not in the sources, a spec that does not resolve).

The program is the user's own, run with the user's rights, like the CLI (ARCHITECTURE.md, threat
model); nothing GPU-specific is imported here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path, to_fs_path

from agent import capture as cap
from cudasrc.source import Document
from sandbox.capture import CaptureError, CaptureRun, RecordedLaunch, run_program
from server import protocol as wire
from server.lsp import MAX_DOCUMENT_BYTES, CudaLanguageServer, OpenDocument
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

ANNOTATION = "cuda-agent.captured-spec"  # change annotation of a captured spec's edit
ANY_KERNEL = "(any kernel)"  # the run's kernel when the command names none


def kernel_pattern(kernel: str) -> str:
    """The regular expression (ECMAScript and Python alike) that finds ``kernel`` (a qualified name)
    in a demangled launch name: ``void ns::k<float>(float*)``, ``k``."""
    return rf"(^|[^\w]){re.escape(kernel)}($|[<(])"


def _path(uri: str) -> Path | None:
    fs = to_fs_path(uri) if uri.startswith("file:") else None
    return Path(fs) if fs else None


def _check(ls: CudaLanguageServer, ref: wire.CaptureRef) -> tuple[Path, Path]:
    """The kernel's file and the folder to run in; JsonRpcInvalidParams for bad arguments."""
    if not ref.command or not ref.command[0]:
        raise JsonRpcInvalidParams("command: give the program to run and its arguments")
    od = ls.document(ref.uri)
    path = od.path if od is not None else _path(ref.uri)
    if path is None or (od is None and not path.is_file()):
        raise JsonRpcInvalidParams(f"{ref.uri}: not a file")
    if ref.kernel is not None:
        doc = od.doc if od is not None else _read(path)
        names = [k.qualified_name for k in doc.kernels] if doc is not None else []
        if ref.kernel not in names:
            raise JsonRpcInvalidParams(
                f"no kernel {ref.kernel!r} in {path.name} (kernels: {', '.join(names) or 'none'})"
            )
    root = ls.workspace.root_path
    base = Path(root) if root else path.parent
    cwd = base / ref.cwd if ref.cwd else base
    if not cwd.is_dir():
        raise JsonRpcInvalidParams(f"cwd: {cwd} is not a folder")
    return path, cwd


def _read(path: Path) -> Document | None:
    data = path.read_bytes()
    return (
        Document(data.decode("utf-8", errors="replace"), str(path))
        if len(data) <= MAX_DOCUMENT_BYTES
        else None
    )


def plan_capture(ls: CudaLanguageServer, ref: wire.CaptureRef) -> Plan:
    path, cwd = _check(ls, ref)
    program = Path(ref.command[0]).name
    return Plan(
        ref.uri,
        ref.kernel or ANY_KERNEL,
        f"Capturing a spec from a run of {program}",
        lambda run, progress: _capture(ls, run, ref, path, cwd, progress),
    )


async def _capture(
    ls: CudaLanguageServer,
    run: ActiveRun,
    ref: wire.CaptureRef,
    path: Path,
    cwd: Path,
    progress: RunProgress,
) -> wire.RunFinished:
    runs = ls.need(Runs)
    assert ls.loop is not None
    pattern = kernel_pattern(ref.kernel) if ref.kernel else None

    env = program_environment(ls.settings)

    def watch(report: Report) -> CaptureRun:
        return run_program(
            ref.command, kernel=pattern, cwd=str(cwd), interactive=False, cancel=run.cancel, env=env
        )

    try:
        done = await run_with_progress(ls, run, progress, f"running {' '.join(ref.command)}", watch)
    except CaptureError as exc:
        return run_finished(run, RunStatus.ERROR, str(exc))
    launches = [x for x in done.launches if pattern is None or re.search(pattern, x.kernel)]
    if not launches:
        return run_finished(run, RunStatus.ERROR, cap.nothing_captured(ref.command[0], done))
    root = ls.workspace.root_path
    roots = [str(path), root or str(path.parent)]
    opened = {str(od.path): od for od in ls.documents.values() if od.doc is not None}
    try:
        found = await ls.loop.run_in_executor(runs.pool, _propose, launches, roots, opened)
    except cap.CaptureMismatch as exc:
        return run_finished(run, RunStatus.ERROR, f"{exc} (the workspace folder is searched)")
    if found.errors:
        return run_finished(run, RunStatus.ERROR, f"the captured spec does not resolve: {found.errors[0]}")
    applied = await _send(ls, found, opened)
    launch, name = found.launch, found.captured.kernel.qualified_name
    message = (
        f"{name}: launch {launch.index} (grid {launch.grid}, block {launch.block}, smem {launch.smem}), "
        f"exit status {done.returncode}; "
        + (
            "spec inserted"
            if applied.applied
            else f"spec not inserted ({applied.failure_reason or 'declined'})"
        )
    )
    notes = "; ".join(found.captured.notes)
    return run_finished(run, RunStatus.OK, f"{message}; notes: {notes}" if notes else message)


def _propose(
    launches: list[RecordedLaunch], roots: list[str], opened: Mapping[str, OpenDocument]
) -> cap.CaptureEdit:
    """The first launch whose kernel is found under ``roots`` (its open version first), placed."""
    docs = {p: od.doc for p, od in opened.items() if od.doc is not None}
    first: cap.CaptureMismatch | None = None
    for launch in launches:
        try:
            return cap.propose([launch], None, roots, docs)
        except cap.CaptureMismatch as exc:
            first = first or exc
    assert first is not None
    raise first


async def _send(
    ls: CudaLanguageServer, found: cap.CaptureEdit, opened: Mapping[str, OpenDocument]
) -> lsp.ApplyWorkspaceEditResult:
    """The spec as one annotated edit (needing confirmation) of the kernel's file: against the
    version the spec was computed from when it is open, else the file as it is on disk."""
    where = Path(found.doc.path or "").resolve()
    od = next((od for p, od in opened.items() if Path(p).resolve() == where), None)
    uri = od.uri if od is not None else from_fs_path(str(where)) or where.as_uri()
    rng = lsp.Range(lsp.Position(found.start_line, 0), lsp.Position(found.end_line, 0))
    name = found.captured.kernel.qualified_name
    label = f"Spec of {name} captured from launch {found.launch.index}"
    edit = lsp.WorkspaceEdit(
        document_changes=[
            lsp.TextDocumentEdit(
                text_document=lsp.OptionalVersionedTextDocumentIdentifier(
                    uri=uri, version=od.version if od is not None else None
                ),
                edits=[
                    lsp.AnnotatedTextEdit(annotation_id=ANNOTATION, range=rng, new_text=found.replacement)
                ],
            )
        ],
        change_annotations={
            ANNOTATION: lsp.ChangeAnnotation(
                label=label, needs_confirmation=True, description="; ".join(found.captured.notes) or None
            )
        },
    )
    return await ls.workspace_apply_edit_async(lsp.ApplyWorkspaceEditParams(edit=edit, label=label))


def setup(ls: CudaLanguageServer) -> None:
    add_run_type(ls, RunType(RunKind.CAPTURE, wire.CAPTURE_COMMAND, wire.CaptureRef, plan_capture))
