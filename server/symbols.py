"""Document symbols (the Outline): kernels with their parameters (from the source model), functions,
macros and ``__constant__`` variables."""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from cudasrc.source import Document
from cudasrc.syntax import Span
from server.lsp import CudaLanguageServer, OpenDocument, lsp_range

_CONTAINERS = frozenset(
    {"namespace_definition", "linkage_specification", "template_declaration", "declaration_list"}
)
_MACROS = frozenset({"preproc_def", "preproc_function_def"})


def _declared_name(node: Any) -> Any:
    """The identifier a (possibly nested) declarator declares, or None."""
    while node is not None and node.type not in ("identifier", "field_identifier", "qualified_identifier"):
        node = node.child_by_field_name("declarator")
    return node


def top_level_symbols(doc: Document) -> list[tuple[str, lsp.SymbolKind, str, Span, Span]]:
    """(name, kind, detail, definition span, name span) of what the file defines at file or namespace
    scope besides kernels: functions (``__device__``, host, ``main``), macros and ``__constant__``
    variables.  A walk over the top of the source model's tree, never into function bodies."""
    found = []
    stack = list(reversed(doc.tree.root_node.children))
    while stack:
        node = stack.pop()
        if node.type in _CONTAINERS:
            stack.extend(reversed(node.children))
        elif node.type == "function_definition":
            kinds = {c.type for c in node.children}
            name = _declared_name(node.child_by_field_name("declarator"))
            if "__global__" in kinds or name is None:
                continue  # kernels come from the source model, with their parameters
            detail = " ".join(q for q in ("__host__", "__device__") if q in kinds) or "host"
            found.append(
                (doc.node_text(name), lsp.SymbolKind.Function, detail, doc.span(node), doc.span(name))
            )
        elif node.type in _MACROS:
            name = node.child_by_field_name("name")
            if name is not None:
                found.append(
                    (doc.node_text(name), lsp.SymbolKind.Constant, "#define", doc.span(node), doc.span(name))
                )
        elif node.type == "declaration" and any(
            c.type == "type_qualifier" and doc.node_text(c) == "__constant__" for c in node.children
        ):
            kind = node.child_by_field_name("type")
            for declarator in node.children_by_field_name("declarator"):
                name = _declared_name(declarator)
                if name is not None:
                    detail = "__constant__ " + (doc.node_text(kind) if kind is not None else "")
                    found.append(
                        (
                            doc.node_text(name),
                            lsp.SymbolKind.Constant,
                            detail.strip(),
                            doc.span(node),
                            doc.span(name),
                        )
                    )
    return found


def document_symbols(od: OpenDocument) -> list[lsp.DocumentSymbol]:
    """Kernels (their signature as detail, their parameters as children), then the other top-level
    definitions (functions, macros, ``__constant__`` variables), in file order."""
    if od.doc is None:
        return []
    symbols = [
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
                if p.name
            ],
        )
        for k in od.kernels
    ]
    symbols += [
        lsp.DocumentSymbol(
            name=name, detail=detail, kind=kind, range=lsp_range(span), selection_range=lsp_range(name_span)
        )
        for name, kind, detail, span, name_span in top_level_symbols(od.doc)
    ]
    return sorted(symbols, key=lambda s: (s.range.start.line, s.range.start.character))


def setup(ls: CudaLanguageServer) -> None:
    @ls.feature(lsp.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls: CudaLanguageServer, params: lsp.DocumentSymbolParams) -> Any:
        od = ls.document(params.text_document.uri)
        return od.cached("symbols", lambda: document_symbols(od)) if od is not None else []
