"""Code lenses above each kernel, and the spec quick fix.

With a spec that parses: **Benchmark** and **Optimize**, the last benchmark, and **Apply** for a
verified rewrite waiting for this version of the file.  Without one: **Add benchmark spec**,
which inserts the spec inferred from the code (``cudaAgent.addSpec``); the same edit is the quick
fix of the ``missing-spec`` diagnostic, as a snippet where the client supports snippet edits.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types as lsp

from agent import spec as specs
from agent.source import Kernel
from server.compare import code_actions as compare_actions
from server.hover import benchmark_line
from server.lsp import CudaLanguageServer, OpenDocument
from server.store import OptimizeRecord, kernel_hash

log = logging.getLogger(__name__)

ADD_SPEC = "cudaAgent.addSpec"


def code_lenses(ls: CudaLanguageServer, od: OpenDocument) -> list[lsp.CodeLens]:
    results = ls.store.for_file(od.path)
    lenses: list[lsp.CodeLens] = []
    for k in od.kernels:
        rng = lsp.Range(lsp.Position(k.span.start_line, 0), lsp.Position(k.span.start_line, 0))
        arg: dict[str, Any] = {"uri": od.uri, "kernel": k.qualified_name}
        view = od.spec(k)
        if view.spec is not None:
            lenses.append(_lens(rng, "▶ Benchmark", "cudaAgent.benchmark", arg))
            lenses.append(_lens(rng, "⚡ Optimize", "cudaAgent.optimize", arg))
        elif view.written:
            first = view.errors[0]
            lenses.append(_lens(rng, f"⚠ spec error, line {first.line + 1}: {first.message}", "", None))
        else:
            lenses.append(_lens(rng, "Add benchmark spec", ADD_SPEC, arg))
        rec = results.get(k.qualified_name)
        if rec is not None and rec.benchmark is not None:
            lenses.append(_lens(rng, benchmark_line(rec.benchmark), "", None))
        todo = _launch_todo(od, k, rec.optimize if rec is not None else None)
        if todo:
            lenses.append(_lens(rng, f"⚠ {todo}", "", None))
        rewrite = ls.runs.pending(od, k.qualified_name) if ls.runs is not None else None
        if rewrite is not None:
            title = f"✓ Apply verified rewrite ({rewrite.speedup:.2f}× faster)"
            lenses.append(_lens(rng, title, "cudaAgent.applyRewrite", {"runId": rewrite.run_id}))
    return lenses


def _launch_todo(od: OpenDocument, k: Kernel, rec: OptimizeRecord | None) -> str:
    """The launch change the applied rewrite of ``k`` still needs, while the file has no launch
    site of it ("" otherwise)."""
    if rec is None or not rec.launch_todo or od.doc is None or od.doc.launches_of(k.name):
        return ""
    return rec.launch_todo if kernel_hash(od.doc, k) == rec.rewritten_hash else ""


def _lens(rng: lsp.Range, title: str, command: str, arg: dict[str, Any] | None) -> lsp.CodeLens:
    return lsp.CodeLens(
        range=rng, command=lsp.Command(title=title, command=command, arguments=[arg] if arg else None)
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
    """On the kernel under the cursor or selection: Optimize / Benchmark, or the spec quick fix."""
    od = ls.document(params.text_document.uri)
    if od is None or od.doc is None:
        return []
    moves = _spec_moves(od, params)
    k = od.doc.kernel_at(params.range.start.line) or od.doc.kernel_at(params.range.end.line)
    if k is None:
        return moves
    view = od.spec(k)
    arg = {"uri": od.uri, "kernel": k.qualified_name}
    if view.spec is not None:
        return [
            lsp.CodeAction(
                title=f"Optimize {k.qualified_name} (verified on the GPU)",
                kind=lsp.CodeActionKind.RefactorRewrite,
                command=lsp.Command(title="Optimize", command="cudaAgent.optimize", arguments=[arg]),
            ),
            lsp.CodeAction(
                title=f"Benchmark {k.qualified_name}",
                command=lsp.Command(title="Benchmark", command="cudaAgent.benchmark", arguments=[arg]),
            ),
            *compare_actions(ls, od, k),
        ]
    if view.written:
        return []
    edit = spec_edit(ls, od, k)
    if edit is None:
        return []
    fixes = [d for d in params.context.diagnostics if d.code == "missing-spec"]
    return [
        lsp.CodeAction(
            title=f"Add benchmark spec for {k.qualified_name} (inferred)",
            kind=lsp.CodeActionKind.QuickFix,
            diagnostics=fixes or None,
            is_preferred=True,
            edit=edit,
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
        pending = ls.runs.generation if ls.runs is not None else 0
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

    @ls.command(ADD_SPEC)
    async def add_spec(ls: CudaLanguageServer, *args: Any) -> dict[str, Any]:
        od, k = ls.kernel_arg(args)
        edit = spec_edit(ls, od, k)
        if edit is None:
            return {"applied": False, "message": "the document is too large to analyse"}
        result = await ls.workspace_apply_edit_async(
            lsp.ApplyWorkspaceEditParams(edit=edit, label=f"Add benchmark spec for {k.qualified_name}")
        )
        return {"applied": result.applied, "message": result.failure_reason or ""}
