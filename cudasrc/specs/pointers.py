"""Pointer roles: which array parameters a kernel reads, writes or both, and over which index range."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import replace

import tree_sitter

from cudasrc.dtypes import is_float
from cudasrc.source import Document
from cudasrc.specs.expressions import _rename
from cudasrc.specs.model import ArrayRole, ArraySpec, DistSpec, ScalarSpec
from cudasrc.syntax import Kernel
from sandbox.expr import operand


def _body_identifiers(doc: Document, kernel: Kernel) -> set[str]:
    node = _body_node(doc, kernel)
    if node is None:
        return set()
    return {doc.node_text(n) for n in _walk(node) if n.type == "identifier"}


def _body_node(doc: Document, kernel: Kernel) -> tree_sitter.Node | None:
    if kernel.body_span is None:
        return None
    return doc.tree.root_node.descendant_for_byte_range(
        kernel.body_span.start_byte, kernel.body_span.end_byte
    )


def _walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


_STORES = re.compile(r"^__st(cs|cg|wb|wt|_\w+)?$")
_LOADS = re.compile(r"^__ld(g|cs|cg|ca|lu|cv)$")


def roles(doc: Document, kernel: Kernel) -> dict[str, ArrayRole]:
    """Each pointer parameter's role from what the body does with it (comments never count): ``in``
    when only read (or ``const``), ``out`` when its first access in evaluation order is a plain
    store, ``inout`` otherwise.  Local pointers derived from a parameter (``float* row = out + i``)
    count as the parameter; a pointer handed to an unknown function is read and written."""
    body = _body_node(doc, kernel)
    params = {p.name: p for p in kernel.params if p.pointer}
    out: dict[str, ArrayRole] = {n: ("in" if p.const else "inout") for n, p in params.items()}
    if body is None:
        return out
    alias: dict[str, str] = {n: n for n in params}
    events: dict[str, list[tuple[int, str]]] = {n: [] for n in params}
    for n in _walk(body):
        if n.type == "init_declarator":
            target = n.child_by_field_name("declarator")
            value = n.child_by_field_name("value")
            base = _base_pointer(doc, value, alias) if value is not None else None
            if base is not None and target is not None and target.type == "pointer_declarator":
                inner = target.child_by_field_name("declarator")
                if inner is not None:
                    alias[doc.node_text(inner)] = base
            continue
        if n.type != "identifier" or doc.node_text(n) not in alias:
            continue
        if n.parent is not None and n.parent.type in (
            "pointer_declarator",
            "init_declarator",
            "array_declarator",
        ):
            continue  # the declared name itself
        name = alias[doc.node_text(n)]
        kind, at = _use(doc, n)
        if kind:
            events[name].append((at, kind))
    for name, evs in events.items():
        if params[name].const:
            continue
        evs.sort()
        kinds = set("".join(k for _, k in evs))
        if "w" not in kinds:
            out[name] = "in"
        elif evs and evs[0][1] == "w":
            out[name] = "out"
        else:
            out[name] = "inout"
    return out


def _base_pointer(doc: Document, node: tree_sitter.Node | None, alias: Mapping[str, str]) -> str | None:
    while node is not None and node.type in (
        "parenthesized_expression",
        "cast_expression",
        "binary_expression",
    ):
        if node.type == "binary_expression":
            left = _base_pointer(doc, node.child_by_field_name("left"), alias)
            if left is not None:
                return left
            node = node.child_by_field_name("right")
        elif node.type == "cast_expression":
            node = node.child_by_field_name("value")
        else:
            node = node.named_children[0] if node.named_children else None
    if node is not None and node.type == "identifier":
        return alias.get(doc.node_text(node))
    if node is not None and node.type == "pointer_expression" and doc.node_text(node).startswith("&"):
        arg = node.child_by_field_name("argument")
        if arg is not None and arg.type == "subscript_expression":
            return _base_pointer(doc, arg.child_by_field_name("argument"), alias)
    return None


def _use(doc: Document, ident: tree_sitter.Node) -> tuple[str, int]:
    """How an occurrence of a pointer is used ("r" read, "w" write, "rw" both, "" neither: a
    comparison with nullptr, a declaration's alias), and when: the byte where it happens in
    evaluation order (an assignment's store after its right-hand side)."""
    kind = _use_kind(doc, ident)
    node = ident
    while (
        node.parent is not None
        and node.parent.type != "assignment_expression"
        and node.parent.type
        not in (
            "expression_statement",
            "compound_statement",
        )
    ):
        node = node.parent
    up = node.parent
    if up is not None and up.type == "assignment_expression" and up.child_by_field_name("left") == node:
        return kind, up.end_byte
    return kind, ident.start_byte


def _use_kind(doc: Document, ident: tree_sitter.Node) -> str:
    node = ident
    parent = node.parent
    while parent is not None and (
        parent.type in ("parenthesized_expression", "cast_expression")
        or (
            parent.type == "binary_expression"
            and doc.node_text(parent.child_by_field_name("operator") or parent) in ("+", "-")
        )
    ):
        node, parent = parent, parent.parent
    if parent is None:
        return "r"
    if parent.type == "assignment_expression" and parent.child_by_field_name("left") == node:
        return ""  # `d_Dst += baseY * pitch`: the pointer moves, its elements are not touched
    if (
        parent.type == "binary_expression"
        or parent.type == "init_declarator"
        or parent.type == "condition_clause"
    ):
        return ""
    access = parent
    if (parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node) or (
        parent.type == "pointer_expression" and doc.node_text(parent).startswith("*")
    ):
        access = parent
    elif parent.type == "pointer_expression":  # &p[i] handed on
        return "rw"
    elif parent.type == "argument_list":
        call = parent.parent
        fn = call.child_by_field_name("function") if call is not None else None
        name = doc.node_text(fn).split("::")[-1] if fn is not None else ""
        first = parent.named_children[0] == node if parent.named_children else False
        if _STORES.match(name) and first:
            return "w"
        if _LOADS.match(name):
            return "r"
        return "rw"
    else:
        return "r"
    up = access.parent
    while up is not None and up.type == "parenthesized_expression":  # `atomicAdd(&(y[i]), 1)`
        up = up.parent
    if up is not None and up.type == "pointer_expression" and doc.node_text(up).startswith("&"):
        grand = up.parent
        if grand is not None and grand.type == "argument_list":
            call = grand.parent
            fn = call.child_by_field_name("function") if call is not None else None
            name = doc.node_text(fn) if fn is not None else ""
            return "rw" if name.startswith("atomic") else "w" if _STORES.match(name) else "rw"
        return "rw"
    if up is not None and up.type == "assignment_expression" and up.child_by_field_name("left") == access:
        op = doc.node_text(up.child_by_field_name("operator") or up)
        return "w" if op == "=" else "rw"
    if up is not None and up.type == "update_expression":
        return "rw"
    return "r"


def _index_ranges(
    doc: Document, kernel: Kernel, specs: list[ArraySpec | ScalarSpec]
) -> list[ArraySpec | ScalarSpec]:
    """Integer inputs whose values index another array (token ids into an embedding) drawn with
    ``randint(0, rows)`` of that array: ``wte + ix * C`` with ``int ix = inp[...]``."""
    body = _body_node(doc, kernel)
    if body is None:
        return specs
    by_name = {s.name: s for s in specs}
    scalars = {s.name: s.value for s in specs if isinstance(s, ScalarSpec)}
    loaded: dict[str, str] = {}  # local -> int pointer it was read from
    for n in _walk(body):
        if n.type == "init_declarator":
            value = n.child_by_field_name("value")
            target = n.child_by_field_name("declarator")
            if (
                value is not None
                and value.type == "subscript_expression"
                and target is not None
                and target.type == "identifier"
            ):
                src = doc.node_text(value.child_by_field_name("argument") or value)
                s = by_name.get(src)
                if isinstance(s, ArraySpec) and not is_float(s.dtype) and s.role == "in":
                    loaded[doc.node_text(target)] = src
    ranges: dict[str, str] = {}
    for n in _walk(body):  # `bins[data[i]]`: data's values index bins
        index = n.child_by_field_name("indices") if n.type == "subscript_expression" else None
        inner = index.named_children[0] if index is not None and index.named_children else None
        outer = n.child_by_field_name("argument")
        if inner is not None and inner.type == "subscript_expression" and outer is not None:
            values_of = by_name.get(doc.node_text(inner.child_by_field_name("argument") or inner))
            into = by_name.get(doc.node_text(outer))
            if (
                isinstance(values_of, ArraySpec)
                and isinstance(into, ArraySpec)
                and not is_float(values_of.dtype)
            ):
                ranges.setdefault(values_of.name, into.count)
    for n in _walk(body):
        if n.type != "binary_expression" or doc.node_text(n.child_by_field_name("operator") or n) != "+":
            continue
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        for ptr, off in ((left, right), (right, left)):
            if ptr is None or off is None or ptr.type != "identifier":
                continue
            indexed = by_name.get(doc.node_text(ptr))
            if not isinstance(indexed, ArraySpec):
                continue
            factors = [doc.node_text(f).strip() for f in _product_factors(off)]
            idx = [f for f in factors if f in loaded]
            if len(idx) != 1:
                continue
            stride = [_rename(f, scalars) for f in factors if f != idx[0]]
            extent = _divide(indexed.count, stride)
            ranges.setdefault(loaded[idx[0]], extent)
    return [
        replace(s, dist=DistSpec("randint", ("0", ranges[s.name])))
        if isinstance(s, ArraySpec) and s.name in ranges
        else s
        for s in specs
    ]


def _product_factors(node: tree_sitter.Node | None) -> list[tree_sitter.Node]:
    """The factors of ``a * b * c``; of ``ix * C + c`` those of its first term (the indexed one)."""
    if node is None:
        return []
    op = node.child_by_field_name("operator") if node.type == "binary_expression" else None
    if op is not None and op.type == "*":
        return [
            *_product_factors(node.child_by_field_name("left")),
            *_product_factors(node.child_by_field_name("right")),
        ]
    if op is not None and op.type == "+":
        return _product_factors(node.child_by_field_name("left"))
    return [node]


def _divide(count: str, stride: list[str]) -> str:
    """``V*C`` / [``C``] -> ``V`` (a factor removed when present), else ``(count) / (stride)``."""
    try:
        tree = ast.parse(count, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return count
    factors: list[ast.expr] = []

    def flat(n: ast.expr) -> None:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            flat(n.left)
            flat(n.right)
        else:
            factors.append(n)

    flat(tree)
    rest = [ast.unparse(f) for f in factors]
    leftover = []
    for s in stride:
        if s in rest:
            rest.remove(s)
        else:
            leftover.append(s)
    expr = "*".join(operand(r) for r in rest) or "1"
    return f"({expr}) / ({'*'.join(leftover)})" if leftover else expr
