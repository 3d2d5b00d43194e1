"""Launch changes: a new launch configuration for a kernel (:class:`LaunchChange`, in the spec's
vocabulary) and what it does to a file: the edits of the kernel's launch sites and of its spec's
``launch`` line (:class:`LaunchEdits`).
"""

from __future__ import annotations

import ast
import logging
import re
from dataclasses import dataclass, replace

import tree_sitter

from cudasrc import specs as spec_mod
from cudasrc.source import Document
from cudasrc.specs import KernelSpec, ScalarSpec, parse_dims
from cudasrc.syntax import Expr, Kernel, LaunchSite

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LaunchChange:
    """A new launch configuration as expressions over the spec's size variables and ``block``
    (the spec's vocabulary, e.g. ``grid="cdiv(n, block*4)"``, ``block="128"``); None keeps the
    spec's own expression."""

    grid: str | None = None
    block: str | None = None
    shared: str | None = None


@dataclass(frozen=True)
class TextEdit:
    """Replace ``text[start:end]`` (character offsets into the original file) with ``new_text``."""

    start: int
    end: int
    new_text: str


@dataclass(frozen=True)
class LaunchEdits:
    """What a launch change does to the file: ``edits`` to the kernel's launch sites and to its
    spec's ``launch`` line (so the spec keeps describing what the code launches); ``sites`` the
    number of launch sites rewritten; ``todo`` what the user must still change by hand ("" when
    nothing), e.g. when the file has no launch site of the kernel."""

    edits: tuple[TextEdit, ...] = ()
    sites: int = 0
    todo: str = ""


def launch_edits(
    doc: Document, k: Kernel, spec: KernelSpec, sites: tuple[LaunchSite, ...], change: LaunchChange
) -> LaunchEdits:
    """What ``change`` does to ``doc``: its launch ``sites`` of ``k`` rewritten where they can be
    and ``k``'s spec's ``launch`` line made to say the new configuration."""
    edits, rewritten = _site_edits(doc, k, spec, sites, change)
    new = with_launch(spec, change)
    how = _launch_directive(new).removeprefix("launch ")
    todo = ""
    if not sites:
        todo = f"no launch site of {k.name} in this file: launch it with {how}"
    elif rewritten < len(sites):
        todo = (
            f"{len(sites) - rewritten} launch site(s) of {k.name} could not be rewritten: "
            f"launch them with {how}"
        )
    spec_edit = _spec_launch_edit(doc.text, k, spec, new)
    return LaunchEdits(tuple(sorted((*edits, spec_edit), key=lambda e: e.start)), rewritten, todo)


def sites_edits(
    doc: Document, k: Kernel, spec: KernelSpec, change: LaunchChange
) -> tuple[tuple[TextEdit, ...], int, int]:
    """The edits of ``doc``'s launch sites of ``k`` (defined in this file or another: a header, a
    launcher's translation unit) for ``change``: (edits, sites rewritten, sites in all)."""
    sites = doc.launches_of(k.name)
    edits, rewritten = _site_edits(doc, k, spec, sites, change)
    return edits, rewritten, len(sites)


def char_offset(doc: Document, byte: int) -> int:
    return len(doc.data[:byte].decode("utf-8", errors="replace"))


def _launch_directive(spec: KernelSpec) -> str:
    """The spec's ``launch`` directive as written by :func:`cudasrc.specs.render`."""
    out = f"launch grid={spec_mod.render_dims(spec.grid)} block={spec_mod.render_dims(spec.block)}"
    return out + (f" smem={spec.smem}" if spec.smem != "0" else "")


def _spec_launch_edit(text: str, k: Kernel, old: KernelSpec, new: KernelSpec) -> TextEdit:
    """The edit of ``k``'s spec that makes its ``launch`` line say ``new``'s launch: the line
    rewritten in place, or (when the spec had none) inserted after the spec's last line."""
    starts = [0, *(i + 1 for i, ch in enumerate(text) if ch == "\n")]
    line = old.lines.get("launch")
    directive = _launch_directive(new)
    if line is not None:
        begin = starts[line]
        end = starts[line + 1] - 1 if line + 1 < len(starts) else len(text)
        row = text[begin:end]
        at = row.index(spec_mod.MARKER) + len(spec_mod.MARKER)
        content = row[at:]
        lead = len(content) - len(content.lstrip())
        return TextEdit(begin + at + lead, begin + at + len(content.rstrip()), directive)
    last = max(n for n, body in k.comment if spec_mod.MARKER in body)
    begin = starts[last]
    row = text[begin : starts[last + 1] if last + 1 < len(starts) else len(text)]
    prefix = row[: row.index(spec_mod.MARKER)]
    at = starts[last + 1] if last + 1 < len(starts) else len(text)
    return TextEdit(at, at, f"{prefix}{spec_mod.MARKER} {directive}\n")


def with_launch(spec: KernelSpec, change: LaunchChange) -> KernelSpec:
    return replace(
        spec,
        grid=parse_dims(change.grid) if change.grid else spec.grid,
        block=parse_dims(change.block) if change.block else spec.block,
        smem=change.shared or spec.smem,
    )


class _ToHost(ast.NodeTransformer):
    """A spec expression as C host code: sizes become the launch site's argument expressions."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.names:
            raise KeyError(node.id)
        host = self.names[node.id]
        return ast.Name(id=host if re.fullmatch(r"\w+", host) else f"({host})")

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if not isinstance(node.func, ast.Name) or node.func.id not in ("cdiv", "min", "max"):
            raise KeyError(ast.unparse(node.func))
        args = [self.visit(x) for x in node.args]
        if node.func.id == "cdiv" and len(args) == 2:  # (a + b - 1) / b
            a, b = args
            return ast.BinOp(ast.BinOp(a, ast.Add(), ast.BinOp(b, ast.Sub(), ast.Constant(1))), ast.Div(), b)
        return ast.Call(node.func, args, [])

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        raise KeyError(ast.unparse(node))


def _host(expr: str, names: dict[str, str]) -> str:
    tree = _ToHost(names).visit(ast.parse(expr, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree)).replace("//", "/")


def _site_edits(
    doc: Document, k: Kernel, spec: KernelSpec, sites: tuple[LaunchSite, ...], change: LaunchChange
) -> tuple[tuple[TextEdit, ...], int]:
    """Edits of this file's launch sites of ``k`` for ``change``, and how many sites they cover:
    each size variable must be passed to the kernel as a scalar argument (``arg n = n``) so it has
    a host expression there.  Sites that cannot be translated are left alone."""
    params = [p.name for p in k.params]
    new = with_launch(spec, change)
    edits: list[TextEdit] = []
    rewritten = 0
    for site in sites:
        names: dict[str, str] = {}
        for a in spec.args:
            if isinstance(a, ScalarSpec) and a.value in spec.sizes and a.name in params:
                i = params.index(a.name)
                if i < len(site.args):
                    names[a.value] = site.args[i].text
        parts: list[tuple[Expr | None, str]] = []
        try:
            block = ", ".join(_host(e, names) for e in new.block)
            block_host = block if len(new.block) == 1 else f"dim3({block})"
            names_b = {**names, "block": block_host, "block_x": _host(new.block[0], names)}
            grid = ", ".join(_host(e, names_b) for e in new.grid)
            if change.grid or change.block:
                parts.append((site.grid, grid if len(new.grid) == 1 else f"dim3({grid})"))
            if change.block:
                parts.append((site.block, block_host))
            if change.shared:
                parts.append((site.shared, _host(new.smem, names_b)))
        except (KeyError, SyntaxError):
            log.info(
                "launch site at line %d not rewritten: its sizes have no host expression",
                site.span.start_line + 1,
            )
            continue
        rewritten += 1
        replaced: list[Expr] = []
        for expr, text in parts:
            if expr is None:  # no shared-memory argument at the site: insert one after the block
                assert site.block is not None
                at = char_offset(doc, site.block.span.end_byte)
                edits.append(TextEdit(at, at, f", {text}"))
                continue
            start, end = char_offset(doc, expr.span.start_byte), char_offset(doc, expr.span.end_byte)
            if doc.text[start:end] != text:
                edits.append(TextEdit(start, end, text))
                replaced.append(expr)
        edits += _dead_declarations(doc, site, replaced, " ".join(t for _, t in parts))
    return tuple(sorted(set(edits), key=lambda e: e.start)), rewritten


def _dead_declarations(
    doc: Document, site: LaunchSite, replaced: list[Expr], new_text: str
) -> list[TextEdit]:
    """Edits deleting the local declarations (``const int threads = 32;``, each on a line of its
    own) that only the replaced launch expressions of ``site`` used, directly or through another
    declaration deleted here."""
    if not replaced or site.caller_span is None:
        return []
    root = doc.tree.root_node
    fn = root.descendant_for_byte_range(site.caller_span.start_byte, site.caller_span.end_byte)
    if fn is None:
        return []
    kept = set(re.findall(r"[A-Za-z_]\w*", new_text))
    gone = [(e.span.start_byte, e.span.end_byte) for e in replaced]
    edits: list[TextEdit] = []
    suspects = [n for a, b in gone for n in _identifiers(root.descendant_for_byte_range(a, b))]
    while suspects:
        name = doc.node_text(suspects.pop())
        if name in kept:
            continue
        left = [n for n in _identifiers(fn) if doc.node_text(n) == name and not _inside(n, gone)]
        init = left[0].parent if len(left) == 1 else None
        decl = init.parent if init is not None else None
        if (
            init is None
            or decl is None
            or init.type != "init_declarator"
            or decl.type != "declaration"
            or sum(c.type == "init_declarator" for c in decl.named_children) != 1
        ):
            continue
        start, end = char_offset(doc, decl.start_byte), char_offset(doc, decl.end_byte)
        line_start = doc.text.rfind("\n", 0, start) + 1
        line_end = doc.text.find("\n", end)
        line_end = len(doc.text) if line_end < 0 else line_end + 1
        after = doc.text[end:line_end].strip()
        if doc.text[line_start:start].strip() or (after and not after.startswith("//")):
            continue  # shares its line with other code: leave it
        edits.append(TextEdit(line_start, line_end, ""))
        gone.append((decl.start_byte, decl.end_byte))
        suspects += _identifiers(decl)
    return edits


def _inside(node: tree_sitter.Node, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= node.start_byte < b for a, b in ranges)


def _identifiers(node: tree_sitter.Node | None) -> list[tree_sitter.Node]:
    if node is None:
        return []
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            out.append(n)
        stack.extend(n.children)
    return out
