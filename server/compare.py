"""Compare with…: verify and time another kernel of the workspace against the one under the cursor.

- Code actions on a kernel with a spec: one "Compare with NAME" per other kernel of the workspace
  (open documents and the ``.cu``/``.cuh`` files under the workspace root) whose parameter list
  matches (:func:`agent.target.signature_mismatch`: count, types, order; names aside).
- ``cudaAgent.compare`` ``[CompareRef]`` (``{uri, kernel, with}``; ``with``: a kernel of the same
  file, or ``PATH:KERNEL``): :func:`agent.compare.compare` run in the background like Optimize
  (:func:`server.runs.start_run`): answers ``RunStarted`` at once, reports progress the user can
  cancel, and ends with ``cudaAgent/runFinished`` (kind ``compare``; ``status`` ``ok`` when the
  rewrite verified, else its sandbox status or ``error``; the speedup with its range).
- The result is stored on both kernels (:class:`agent.records.CompareRecord`), so it shows as an
  inlay hint and in the hover of each, and in the results view (``cudaAgent/results``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from lsprotocol import types as lsp

from agent import compare as cmp
from agent.proposal import Proposal
from agent.records import CompareRecord, CompareRole, compare_record, kernel_hash
from agent.target import Target, TargetError, signature_mismatch
from cudasrc.source import Document
from cudasrc.syntax import Kernel
from server import protocol as wire
from server.lsp import SUFFIXES, CudaLanguageServer, OpenDocument
from server.protocol import RunKind, RunStatus
from server.runs import (
    ActiveRun,
    Plan,
    Report,
    RunProgress,
    Runs,
    RunType,
    add_run_type,
    evaluation_steps,
    run_finished,
    run_with_progress,
)
from server.settings import compile_options
from server.store import STORE_DIR
from server.texts import SIMULATED, describe_executor

log = logging.getLogger(__name__)

MAX_FILES = 500  # workspace files looked at for kernels to compare with
MAX_ACTIONS = 12


@dataclass(frozen=True)
class Other:
    """A kernel that could stand in for another: where it is and how ``--with`` names it."""

    path: Path
    kernel: Kernel
    ref: str  # the ``with`` argument: NAME (same file) or PATH:NAME
    label: str  # NAME, or NAME (relative path)


@dataclass
class Comparisons:
    """Parsed workspace files (by path, kept while their size and mtime hold)."""

    ls: CudaLanguageServer
    files: dict[Path, tuple[tuple[int, int], Document]] = field(default_factory=dict)

    def document(self, path: Path) -> Document | None:
        """The open document at ``path``, else the file parsed (cached), else None."""
        resolved = path.resolve()
        for od in self.ls.documents.values():
            if od.doc is not None and od.path.resolve() == resolved:
                return od.doc
        try:
            st = resolved.stat()
        except OSError:
            return None
        stamp = (st.st_size, st.st_mtime_ns)
        cached = self.files.get(resolved)
        if cached is None or cached[0] != stamp:
            try:
                cached = (stamp, Document.from_file(resolved))
            except OSError:
                return None
            self.files[resolved] = cached
        return cached[1]

    def workspace_paths(self) -> list[Path]:
        """The open CUDA documents, then the workspace's CUDA files (hidden folders skipped)."""
        paths = [od.path.resolve() for od in self.ls.documents.values()]
        root = self.ls.store.root
        if root is not None and root.is_dir():
            for folder, dirs, names in os.walk(root):
                dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != STORE_DIR)
                paths += [Path(folder, n).resolve() for n in sorted(names) if n.endswith(SUFFIXES)]
                if len(paths) >= MAX_FILES:
                    break
        return list(dict.fromkeys(paths))[:MAX_FILES]

    def others(self, od: OpenDocument, k: Kernel) -> list[Other]:
        """The kernels of the workspace that ``k`` could be compared with (same parameter list)."""
        assert od.doc is not None
        here = od.path.resolve()
        root = self.ls.store.root
        found: list[Other] = []
        for path in self.workspace_paths():
            doc = od.doc if path == here else self.document(path)
            if doc is None:
                continue
            for other in doc.kernels:
                if path == here and other.span == k.span:
                    continue
                if signature_mismatch(k, other, od.doc.type_aliases, doc.type_aliases):
                    continue
                if path == here:
                    found.append(Other(path, other, other.qualified_name, other.qualified_name))
                    continue
                shown = (
                    path.relative_to(root.resolve()) if root and path.is_relative_to(root.resolve()) else path
                )
                found.append(
                    Other(path, other, f"{path}:{other.qualified_name}", f"{other.qualified_name} ({shown})")
                )
        return found


def code_actions(ls: CudaLanguageServer, od: OpenDocument, k: Kernel) -> list[lsp.CodeAction]:
    """ "Compare with NAME" for each matching kernel of the workspace (``k`` needs a spec)."""
    comparisons = ls.part(Comparisons)
    if comparisons is None or od.spec(k).spec is None:
        return []
    return [
        lsp.CodeAction(
            title=f"Compare {k.qualified_name} with {o.label}",
            kind=lsp.CodeActionKind.Refactor,
            command=lsp.Command(
                title="Compare with…",
                command=wire.COMPARE_COMMAND,
                arguments=[wire.CompareRef(od.uri, o.ref, k.qualified_name)],
            ),
        )
        for o in comparisons.others(od, k)[:MAX_ACTIONS]
    ]


def plan_compare(ls: CudaLanguageServer, ref: wire.CompareRef) -> Plan:
    """Compare the kernel with the rewrite ``ref.with_``."""
    od, k = ls.kernel_ref(wire.KernelRef(ref.uri, ref.kernel))
    kernel = k.qualified_name
    comparisons = ls.need(Comparisons)
    if od.doc is None:
        raise TargetError(f"{od.path.name} is too large to analyse")

    def open_document(name: str) -> Document:
        doc = comparisons.document(Path(name))
        if doc is None:
            raise TargetError(f"{name}: no such file")
        return doc

    target, proposal, cand_doc = cmp.prepare(
        od.doc, kernel, ref.with_, None, open_document, compile_options(ls.settings, od.path)
    )
    return Plan(
        od.uri,
        kernel,
        f"Comparing {kernel} with {proposal.kernel}",
        lambda run, progress: _compare(ls, run, od, target, proposal, cand_doc, progress),
    )


async def _compare(
    ls: CudaLanguageServer,
    run: ActiveRun,
    od: OpenDocument,
    target: Target,
    proposal: Proposal,
    cand_doc: Document,
    progress: RunProgress,
) -> wire.RunFinished:
    runs = ls.need(Runs)
    settings = ls.settings

    def work(report: Report) -> cmp.Comparison:
        executor = runs.executor(settings.executor)
        steps = evaluation_steps(report)
        return cmp.compare(
            target, proposal, executor, candidate_path=cand_doc.path, progress=steps, cancel=run.cancel
        )

    try:
        begin = f"{describe_executor(settings.executor)}: compiling"
        found = await run_with_progress(ls, run, progress, begin, work)
    except TargetError as exc:
        return run_finished(run, RunStatus.ERROR, str(exc))
    if found.result.device is not None:
        runs.device = found.result.device.name
    record = _store(ls, od, compare_record(run.run_id, found), found, cand_doc)
    headline = record.headline
    c = found.candidate
    reason = cmp.reason_text(found)
    simulated = found.result.device is not None and found.result.device.simulated
    message = f"{proposal.kernel} against {run.kernel}: {headline}" + (f" ({reason})" if reason else "")
    return run_finished(
        run,
        RunStatus.OK if found.verified else RunStatus(c.status.value),
        f"{SIMULATED}: {message}" if simulated else message,
        simulated=simulated,
        compare=record,
    )


def _store(
    ls: CudaLanguageServer,
    od: OpenDocument,
    common: CompareRecord,
    found: cmp.Comparison,
    cand_doc: Document,
) -> CompareRecord:
    """The comparison on both kernels' records; the original's."""
    assert od.doc is not None
    original_record = common
    same_file = Path(cand_doc.path).resolve() == od.path.resolve()
    original = od.doc.kernel(found.target.kernel.partition("<")[0])
    rewrite = cand_doc.kernel((found.proposal.kernel or "").partition("<")[0])
    for doc, k, role, other, other_doc in (
        (od.doc, original, CompareRole.ORIGINAL, rewrite, cand_doc),
        (cand_doc, rewrite, CompareRole.REWRITE, original, od.doc),
    ):
        if k is None or other is None:
            continue
        name = other.qualified_name if same_file else f"{Path(other_doc.path).name}:{other.qualified_name}"
        record = replace(common, role=role, other=name, kernel_hash=kernel_hash(doc, k))
        ls.store.put(Path(doc.path), k.qualified_name, compare=record)
        if role is CompareRole.ORIGINAL:
            original_record = record
    ls.results_changed()
    return original_record


def setup(ls: CudaLanguageServer) -> None:
    ls.add_part(Comparisons(ls))
    ls.kernel_actions.append(lambda od, k: code_actions(ls, od, k))
    add_run_type(ls, RunType(RunKind.COMPARE, wire.COMPARE_COMMAND, wire.CompareRef, plan_compare))
