"""Verified rewrites waiting for the user: applied on confirmation, or fetched for a diff.

- ``cudaAgent.applyRewrite`` ``[RunRef]``: the one apply path.  Refused, with a message, when the
  document changed since the run began; else one ``workspace/applyEdit`` (kernel, launch sites
  and the spec's launch line) against the document's version, whose change annotation needs
  confirmation.
- ``cudaAgent/rewrite`` ``RunRef``: the rewrite of a run, for a diff view.
"""

from __future__ import annotations

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from server import protocol as wire
from server.lsp import CudaLanguageServer
from server.protocol import ApplyReason
from server.runs import Runs


async def apply_rewrite(ls: CudaLanguageServer, run_id: str) -> wire.ApplyResult:
    """The one apply path: the rewrite of ``run_id`` as one versioned, annotated workspace edit,
    refused when the document changed since the run began."""
    runs = ls.need(Runs)
    pending = runs.rewrites.get(run_id)
    if pending is None:
        return wire.ApplyResult(
            False,
            ApplyReason.NO_REWRITE,
            f"no verified rewrite for run {run_id!r} (already applied, or the server restarted)",
        )
    rw = pending.rewrite
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
                    for e in pending.edits
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
    pending = runs.rewrites.get(run_id) if runs is not None else None
    if pending is None:
        raise JsonRpcInvalidParams(f"no verified rewrite for run {run_id!r}")
    return pending.rewrite


def setup(ls: CudaLanguageServer) -> None:
    @ls.command(wire.APPLY_REWRITE_COMMAND)
    async def apply(ls: CudaLanguageServer, ref: wire.RunRef) -> wire.ApplyResult:
        return await apply_rewrite(ls, ref.run_id)

    @ls.feature(wire.REWRITE_REQUEST)
    def rewrite(ls: CudaLanguageServer, params: wire.RunRef) -> wire.Rewrite:
        return rewrite_payload(ls, params.run_id)
