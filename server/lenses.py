"""Code lenses above each kernel, and the spec quick fix.

With a spec that parses: **Benchmark**, **Optimize** and **Profile**, the last benchmark, and **Apply** for a
verified rewrite waiting for this version of the file.  Without one: **Add benchmark spec**,
which inserts the spec inferred from the code (``cudaAgent.addSpec``: the server sends the edit, as
a snippet where the client supports snippet edits); the same command is the quick fix of the
``missing-spec`` diagnostic.  While a run is in progress: **Cancel**.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types as lsp

from agent.records import OptimizeRecord, kernel_hash
from cudasrc import specs as specs
from cudasrc.syntax import Kernel
from server import protocol as wire
from server.lsp import CudaLanguageServer, OpenDocument
from server.runs import Runs
from server.texts import benchmark_line, benchmark_title

log = logging.getLogger(__name__)


def code_lenses(ls: CudaLanguageServer, od: OpenDocument) -> list[lsp.CodeLens]:
    results = ls.store.for_file(od.path)
    lenses: list[lsp.CodeLens] = []
    runs = ls.part(Runs)
    for k in od.kernels:
        rng = lsp.Range(lsp.Position(k.span.start_line, 0), lsp.Position(k.span.start_line, 0))
        arg = wire.KernelRef(od.uri, k.qualified_name)
        view = od.spec(k)
        running = runs.running(od.uri, k.qualified_name) if runs is not None else None
        if running is not None:
            title = f"⏹ Cancel {running.kind.value} (running)"
            lenses.append(_lens(rng, title, wire.CANCEL_COMMAND, wire.RunRef(running.run_id)))
        elif view.spec is not None:
            lenses.append(_lens(rng, "▶ Benchmark", wire.BENCHMARK_COMMAND, arg))
            lenses.append(_lens(rng, "⚡ Optimize", wire.OPTIMIZE_COMMAND, arg))
            lenses.append(_lens(rng, "◔ Profile", wire.PROFILE_COMMAND, arg))
        elif view.written:
            first = view.errors[0]
            lenses.append(_lens(rng, f"⚠ spec error, line {first.line + 1}: {first.message}", "", None))
        else:
            lenses.append(_lens(rng, "Add benchmark spec", wire.ADD_SPEC_COMMAND, arg))
        rec = results.get(k.qualified_name)
        if rec is not None and rec.benchmark is not None:
            title = benchmark_title(rec.benchmark)
            lenses.append(_lens(rng, title, "", None, tooltip=benchmark_line(rec.benchmark)))
        todo = _launch_todo(od, k, rec.optimize if rec is not None else None)
        if todo:
            lenses.append(_lens(rng, f"⚠ {todo}", "", None))
        pending = runs.pending(od, k.qualified_name) if runs is not None else None
        if pending is not None:
            title = f"✓ Apply verified rewrite ({pending.rewrite.speedup_text})"
            lenses.append(_lens(rng, title, wire.APPLY_REWRITE_COMMAND, wire.RunRef(pending.rewrite.run_id)))
    return lenses


def _launch_todo(od: OpenDocument, k: Kernel, rec: OptimizeRecord | None) -> str:
    """The launch change the applied rewrite of ``k`` still needs, while the file has no launch
    site of it ("" otherwise)."""
    if rec is None or not rec.launch_todo or od.doc is None or od.doc.launches_of(k.name):
        return ""
    return rec.launch_todo if kernel_hash(od.doc, k) == rec.rewritten_hash else ""


def _lens(
    rng: lsp.Range,
    title: str,
    command: str,
    arg: wire.KernelRef | wire.RunRef | None,
    tooltip: str | None = None,
) -> lsp.CodeLens:
    """A lens running ``command`` on ``arg`` (a protocol class: camelCase on the wire, as the
    command's handler structures it), or a plain line of text (no command)."""
    return lsp.CodeLens(
        range=rng,
        command=lsp.Command(title=title, command=command, tooltip=tooltip, arguments=[arg] if arg else None),
    )


def spec_edit(ls: CudaLanguageServer, od: OpenDocument, k: Kernel) -> lsp.WorkspaceEdit | None:
    """Insert the inferred spec above ``k`` (after its comment block); a snippet when the client can."""
    if od.doc is None:
        return None
    inference = specs.infer(od.doc, k)
    text = f"// Benchmark spec inferred from the code ({inference.confidence} confidence): check it.\n"
    text += specs.render_inference(inference)
    at = lsp.Position(k.span.start_line, 0)
    caps = ls.client_capabilities.workspace
    snippets = bool(caps and caps.workspace_edit and caps.workspace_edit.snippet_edit_support)
    doc_id = lsp.OptionalVersionedTextDocumentIdentifier(uri=od.uri, version=od.version)
    edit: lsp.TextEdit | lsp.SnippetTextEdit
    if snippets:
        edit = lsp.SnippetTextEdit(range=lsp.Range(at, at), snippet=lsp.StringValue(_snippet(text)))
    else:
        edit = lsp.TextEdit(range=lsp.Range(at, at), new_text=text)
    return lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(text_document=doc_id, edits=[edit])])


def _snippet(text: str) -> str:
    """The spec with each directive's value a tab stop, so the user can walk through and edit them."""
    out, stop = [], 1
    for line in text.splitlines(keepends=True):
        escaped = line.replace("\\", "\\\\").replace("$", "\\$").replace("}", "\\}")
        head, sep, rest = escaped.partition(f"{specs.MARKER} ")
        if sep and rest.strip():
            word, _, value = rest.partition(" ")
            line = f"{head}{sep}{word} ${{{stop}:{value.rstrip(chr(10))}}}\n" if value.strip() else escaped
            stop += 1
        else:
            line = escaped
        out.append(line)
    return "".join(out) + "$0"


def code_actions(ls: CudaLanguageServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    """On the kernel under the cursor or selection: Apply a verified rewrite waiting for this text,
    Cancel the run in progress or Optimize / Benchmark; or the spec quick fix."""
    od = ls.document(params.text_document.uri)
    if od is None or od.doc is None:
        return []
    moves = _spec_moves(od, params)
    k = od.doc.kernel_at(params.range.start.line) or od.doc.kernel_at(params.range.end.line)
    if k is None:
        return moves
    view = od.spec(k)
    name = k.qualified_name
    arg = wire.KernelRef(od.uri, name)
    runs = ls.part(Runs)
    pending = runs.pending(od, name) if runs is not None else None
    running = runs.running(od.uri, name) if runs is not None else None
    actions = []
    if pending is not None:
        title = f"Apply verified rewrite of {name} ({pending.rewrite.speedup_text})"
        run = wire.RunRef(pending.rewrite.run_id)
        actions.append(
            lsp.CodeAction(
                title=title,
                kind=lsp.CodeActionKind.RefactorRewrite,
                is_preferred=True,
                command=lsp.Command(title=title, command=wire.APPLY_REWRITE_COMMAND, arguments=[run]),
            )
        )
    if running is not None:
        title = f"Cancel the {running.kind.value} run of {name}"
        run = wire.RunRef(running.run_id)
        actions.append(
            lsp.CodeAction(
                title=title, command=lsp.Command(title=title, command=wire.CANCEL_COMMAND, arguments=[run])
            )
        )
    elif view.spec is not None:
        actions += [
            lsp.CodeAction(
                title=f"Optimize {name} (verified on the GPU)",
                kind=lsp.CodeActionKind.RefactorRewrite,
                command=lsp.Command(title="Optimize", command=wire.OPTIMIZE_COMMAND, arguments=[arg]),
            ),
            lsp.CodeAction(
                title=f"Benchmark {name}",
                command=lsp.Command(title="Benchmark", command=wire.BENCHMARK_COMMAND, arguments=[arg]),
            ),
            *(action for provide in ls.kernel_actions for action in provide(od, k)),
        ]
    if view.spec is not None or running is not None:
        return actions
    if view.written or od.doc is None:
        return []
    fixes = [d for d in params.context.diagnostics if d.code == "missing-spec"]
    title = f"Add benchmark spec for {name} (inferred)"
    # a command, not an edit: the server sends the edit (workspace/applyEdit), which the VS Code
    # extension puts into the editor unsaved (a code action's edit goes through VS Code's bulk edit)
    return [
        lsp.CodeAction(
            title=title,
            kind=lsp.CodeActionKind.QuickFix,
            diagnostics=fixes or None,
            is_preferred=True,
            command=lsp.Command(title=title, command=wire.ADD_SPEC_COMMAND, arguments=[arg]),
        )
    ]


def _spec_moves(od: OpenDocument, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    """Quick fix of a misplaced spec block under the cursor: move it directly above its kernel."""
    assert od.doc is not None
    doc, out = od.doc, []
    lo, hi = params.range.start.line, params.range.end.line
    for m in specs.misplaced(doc):
        k = m.kernel
        if k is None or hi < m.first or lo > m.last:
            continue
        block = "".join(doc.line_bytes(n).decode("utf-8", "replace") for n in range(m.first, m.last + 1))
        at = lsp.Position(k.span.start_line, 0)
        edits: list[lsp.TextEdit] = [
            lsp.TextEdit(range=lsp.Range(lsp.Position(m.first, 0), lsp.Position(m.last + 1, 0)), new_text=""),
            lsp.TextEdit(range=lsp.Range(at, at), new_text=block if block.endswith("\n") else block + "\n"),
        ]
        doc_id = lsp.OptionalVersionedTextDocumentIdentifier(uri=od.uri, version=od.version)
        fixes = [d for d in params.context.diagnostics if d.code == "misplaced-spec"]
        out.append(
            lsp.CodeAction(
                title=f"Move the spec directly above {k.qualified_name}",
                kind=lsp.CodeActionKind.QuickFix,
                diagnostics=fixes or None,
                is_preferred=True,
                edit=lsp.WorkspaceEdit(
                    document_changes=[lsp.TextDocumentEdit(text_document=doc_id, edits=edits)]
                ),
            )
        )
    return out


def setup(ls: CudaLanguageServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_CODE_LENS)
    def lenses(ls: CudaLanguageServer, params: lsp.CodeLensParams) -> Any:
        od = ls.document(params.text_document.uri)
        if od is None:
            return []
        runs = ls.part(Runs)
        pending = runs.generation if runs is not None else 0  # runs and pending rewrites
        return od.cached(f"lenses:{ls.generation}:{pending}", lambda: code_lenses(ls, od))

    @ls.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(
            code_action_kinds=[
                lsp.CodeActionKind.QuickFix,
                lsp.CodeActionKind.RefactorRewrite,
                lsp.CodeActionKind.Refactor,
            ]
        ),
    )
    def actions(ls: CudaLanguageServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        return code_actions(ls, params)

    @ls.command(wire.ADD_SPEC_COMMAND)
    async def add_spec(ls: CudaLanguageServer, ref: wire.KernelRef) -> wire.ApplyResult:
        od, k = ls.kernel_ref(ref)
        edit = spec_edit(ls, od, k)
        if edit is None:
            return wire.ApplyResult(False, wire.ApplyReason.TOO_LARGE, "the document is too large to analyse")
        result = await ls.workspace_apply_edit_async(
            lsp.ApplyWorkspaceEditParams(edit=edit, label=f"Add benchmark spec for {k.qualified_name}")
        )
        return wire.ApplyResult.answered(result)
