"""Document symbols: the file's kernels (with their parameters), from the source model."""

from __future__ import annotations

from lsprotocol import types as lsp

from agent.source import Document, Kernel, Span
from server.lsp import CudaLanguageServer


def lsp_range(span: Span) -> lsp.Range:
    return lsp.Range(lsp.Position(span.start_line, span.start_col), lsp.Position(span.end_line, span.end_col))


def signature(doc: Document, kernel: Kernel) -> str:
    """``__global__ void name(params)`` with the parameters as written, and a ``template <...>`` line."""
    params = ", ".join(
        " ".join(doc.data[p.span.start_byte : p.span.end_byte].decode("utf-8", "replace").split())
        for p in kernel.params
    )
    head = ""
    if kernel.template_params:
        tps = ", ".join(
            f"{'typename' if t.kind == 'type' else t.type_text} {t.name}" for t in kernel.template_params
        )
        head = f"template <{tps}>\n"
    return f"{head}__global__ void {kernel.qualified_name}({params})"


def document_symbols(ls: CudaLanguageServer, uri: str) -> list[lsp.DocumentSymbol]:
    od = ls.document(uri)
    if od is None or od.doc is None:
        return []
    doc = od.doc

    def compute() -> list[lsp.DocumentSymbol]:
        return [
            lsp.DocumentSymbol(
                name=k.qualified_name,
                detail="__global__ (" + ", ".join(p.type_text for p in k.params) + ")",
                kind=lsp.SymbolKind.Function,
                range=lsp_range(k.span),
                selection_range=lsp_range(k.name_span),
                children=[
                    lsp.DocumentSymbol(
                        name=p.name,
                        detail=p.type_text,
                        kind=lsp.SymbolKind.Variable,
                        range=lsp_range(p.span),
                        selection_range=lsp_range(p.span),
                    )
                    for p in k.params
                ],
            )
            for k in doc.kernels
        ]

    return od.cached("symbols", compute)


def setup(ls: CudaLanguageServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls: CudaLanguageServer, params: lsp.DocumentSymbolParams) -> list[lsp.DocumentSymbol]:
        return document_symbols(ls, params.text_document.uri)
