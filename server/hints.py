"""Inlay hints: the last verified speedup at each kernel's name ("⚡ 2.4× verified")."""

from __future__ import annotations

from lsprotocol import types as lsp

from agent.records import kernel_hash
from cudasrc.syntax import Kernel
from server.lsp import CudaLanguageServer, OpenDocument
from server.texts import compare_details, compare_label, speedup_details, speedup_label


def inlay_hints(ls: CudaLanguageServer, od: OpenDocument, first: int, last: int) -> list[lsp.InlayHint]:
    """At each kernel's name in ``first..last``: its verified speedup (optimize), then its latest
    comparison (Compare with…)."""
    if od.doc is None:
        return []
    results = ls.store.for_file(od.path)
    hints = []
    for k in od.kernels:
        rec = results.get(k.qualified_name)
        if rec is None or not first <= k.name_span.end_line <= last:
            continue
        h = kernel_hash(od.doc, k)
        if rec.optimize is not None and rec.optimize.outcome == "improved":
            hints.append(_hint(k, speedup_label(rec.optimize, h), speedup_details(rec.optimize, h)))
        if rec.compare is not None:
            hints.append(_hint(k, compare_label(rec.compare, h), compare_details(rec.compare)))
    return hints


def _hint(k: Kernel, label: str, tooltip: str) -> lsp.InlayHint:
    return lsp.InlayHint(
        position=lsp.Position(k.name_span.end_line, k.name_span.end_col),
        label=label,
        padding_left=True,
        tooltip=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=tooltip),
    )


def setup(ls: CudaLanguageServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_INLAY_HINT)
    def hints(ls: CudaLanguageServer, params: lsp.InlayHintParams) -> list[lsp.InlayHint]:
        od = ls.document(params.text_document.uri)
        if od is None:
            return []
        return inlay_hints(ls, od, params.range.start.line, params.range.end.line)
