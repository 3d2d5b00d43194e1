"""Document symbols: the file's kernels (from the source model) and ``__device__`` functions."""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from agent.source import Document, Kernel, Span
from server.lsp import CudaLanguageServer, OpenDocument


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


_CONTAINERS = frozenset(
    {"namespace_definition", "linkage_specification", "template_declaration", "declaration_list"}
)


def device_functions(doc: Document) -> list[tuple[str, Span, Span]]:
    """(name, definition span, name span) of every ``__device__`` function defined at file or
    namespace scope (a walk over the top of the source model's tree, not into function bodies)."""
    found = []
    stack = list(reversed(doc.tree.root_node.children))
    while stack:
        node = stack.pop()
        if node.type in _CONTAINERS:
            stack.extend(reversed(node.children))
        elif node.type == "function_definition":
            kinds = {c.type for c in node.children}
            declarator = node.child_by_field_name("declarator")
            name = declarator.child_by_field_name("declarator") if declarator is not None else None
            if "__device__" in kinds and "__global__" not in kinds and name is not None:
                found.append((doc.node_text(name), doc.span(node), doc.span(name)))
    return found


def document_symbols(od: OpenDocument) -> list[lsp.DocumentSymbol]:
    """Kernels (with their signature as detail) and ``__device__`` functions, in file order."""
    if od.doc is None:
        return []
    symbols = [
        lsp.DocumentSymbol(
            name=k.qualified_name,
            detail="__global__ (" + ", ".join(p.type_text for p in k.params) + ")",
            kind=lsp.SymbolKind.Function,
            range=lsp_range(k.span),
            selection_range=lsp_range(k.name_span),
        )
        for k in od.kernels
    ]
    symbols += [
        lsp.DocumentSymbol(
            name=name,
            detail="__device__",
            kind=lsp.SymbolKind.Function,
            range=lsp_range(span),
            selection_range=lsp_range(name_span),
        )
        for name, span, name_span in device_functions(od.doc)
    ]
    return sorted(symbols, key=lambda s: (s.range.start.line, s.range.start.character))


def setup(ls: CudaLanguageServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls: CudaLanguageServer, params: lsp.DocumentSymbolParams) -> Any:
        od = ls.document(params.text_document.uri)
        return od.cached("symbols", lambda: document_symbols(od)) if od is not None else []
