"""Launch changes: a new launch configuration for a kernel (:class:`LaunchChange`, in the spec's
vocabulary) and what it does to a file: the edits of the kernel's launch sites and of its spec's
``launch`` line (:class:`LaunchEdits`).
"""

from __future__ import annotations

import ast
import logging
from dataclasses import dataclass, replace

import tree_sitter

from cudasrc import macros
from cudasrc import specs as spec_mod
from cudasrc.source import Document
from cudasrc.specs import KernelSpec, ScalarSpec, parse_dims
from cudasrc.syntax import Expr, Kernel, LaunchSite, Parsed

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
    return LaunchEdits(tuple(sorted((*edits, spec_edit), key=lambda e: (e.start, e.end))), rewritten, todo)


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
    """A spec expression as C host code: names become their host spelling (``names``: each already
    parenthesised where it is not a primary expression), ``cdiv(a, b)`` becomes ``(a + b - 1) / b``."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.names:
            raise KeyError(node.id)
        return ast.Name(id=self.names[node.id])

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if not isinstance(node.func, ast.Name) or node.func.id not in ("cdiv", "min", "max"):
            raise KeyError(ast.unparse(node.func))
        args = [self.visit(x) for x in node.args]
        if node.func.id == "cdiv" and len(args) == 2:  # (a + b - 1) / b, (a + 255) / 256
            a, b = args
            number = b.id if isinstance(b, ast.Name) else str(b.value) if isinstance(b, ast.Constant) else ""
            if number.isdecimal():
                return ast.BinOp(ast.BinOp(a, ast.Add(), ast.Constant(int(number) - 1)), ast.Div(), b)
            return ast.BinOp(ast.BinOp(ast.BinOp(a, ast.Add(), b), ast.Sub(), ast.Constant(1)), ast.Div(), b)
        return ast.Call(node.func, args, [])

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        raise KeyError(ast.unparse(node))


def _host(expr: str, names: dict[str, str]) -> str:
    tree = _ToHost(names).visit(ast.parse(expr, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree)).replace("//", "/")


def _operand(expr: str, host: str) -> str:
    """``host`` (the host spelling of spec expression ``expr``) as an operand: parenthesised when
    ``expr`` is an operation."""
    return f"({host})" if isinstance(ast.parse(expr, mode="eval").body, (ast.BinOp, ast.UnaryOp)) else host


_PRIMARY = (
    "identifier",
    "number_literal",
    "field_expression",
    "call_expression",
    "parenthesized_expression",
    "subscript_expression",
)


@dataclass(frozen=True)
class _Binding:
    """The one declaration of this file a launch's block or grid name is bound to: a local or
    file-scope variable (``const int threads = 32;``, ``dim3 block(32);``) or an object-like macro
    (``#define BLOCK 32``).  ``values`` are the nodes holding its value (dim3's arguments, one each)."""

    name: str
    decl: tree_sitter.Node
    name_node: tree_sitter.Node
    values: tuple[tree_sitter.Node, ...]
    dim3: bool
    scope: tree_sitter.Node  # where it can be used: its function, or the file


def _node(doc: Document, expr: Expr) -> tree_sitter.Node | None:
    return doc.tree.root_node.descendant_for_byte_range(expr.span.start_byte, expr.span.end_byte)


def _binding(doc: Document, site: LaunchSite, expr: Expr | None) -> _Binding | None:
    """What the launch expression ``expr`` is bound to, when it is a name declared once in its
    function (before the launch) or, failing that, once in the file."""
    node = _node(doc, expr) if expr is not None else None
    if node is None or node.type != "identifier":
        return None
    name = doc.node_text(node)
    root = doc.tree.root_node
    fn = (
        root.descendant_for_byte_range(site.caller_span.start_byte, site.caller_span.end_byte)
        if site.caller_span
        else None
    )
    for scope in (fn, root):
        if scope is None:
            continue
        found: list[_Binding] = []
        for n in _descendants(scope, ("function_definition",) if scope is root else ()):
            if n.type == "preproc_def" and scope is root:
                name_node, value = n.child_by_field_name("name"), n.child_by_field_name("value")
                if name_node is not None and value is not None and doc.node_text(name_node) == name:
                    found.append(_Binding(name, n, name_node, (value,), False, root))
            elif n.type == "parameter_declaration" and name in (doc.node_text(i) for i in _identifiers(n)):
                return None  # a parameter: its value is the caller's
            elif n.type == "declaration" and n.start_byte < site.span.start_byte:
                for init in n.children_by_field_name("declarator"):
                    b = _declared(doc, n, init, name, scope)
                    if b is not None:
                        found.append(b)
        if found:
            return found[0] if len(found) == 1 else None
    return None


def _declared(
    doc: Document, decl: tree_sitter.Node, init: tree_sitter.Node, name: str, scope: tree_sitter.Node
) -> _Binding | None:
    target, value = init.child_by_field_name("declarator"), init.child_by_field_name("value")
    kind = decl.child_by_field_name("type")
    dim3 = kind is not None and doc.node_text(kind) == "dim3"
    if init.type == "function_declarator" and dim3:  # `dim3 block(BLOCK);` parses as a function
        value = init.child_by_field_name("parameters")
        params = value.named_children if value is not None else []
        args = [p.child_by_field_name("type") for p in params if p.child_by_field_name("declarator") is None]
        if target is None or doc.node_text(target) != name or not params or len(args) != len(params):
            return None
        return _Binding(name, decl, target, tuple(a for a in args if a is not None), True, scope)
    if init.type != "init_declarator" or target is None or value is None or doc.node_text(target) != name:
        return None
    if value.type == "call_expression" and dim3:
        value = value.child_by_field_name("arguments") or value
    values = tuple(value.named_children) if value.type in ("argument_list", "initializer_list") else (value,)
    return _Binding(name, decl, target, values, dim3, scope)


def _uses(doc: Document, b: _Binding, specs_text: list[str]) -> list[tree_sitter.Node] | None:
    """The uses of ``b``'s name in its scope; None when it is also used where they cannot be
    followed: another macro's body or a spec line."""
    if b.scope.type == "translation_unit":
        others = [m for m in macros.definitions(doc).values() if m.name != b.name]
        parsed = [Parsed(line) for line in specs_text]
        if any(t.text == b.name for m in others for t in m.body) or any(
            t.text == b.name for p in parsed for t, _, _ in macros.tokens(p, p.tree.root_node)
        ):
            return None
    return [
        n
        for n in _descendants(b.scope)
        if n.type in ("identifier", "type_identifier")  # `dim3 block(BLOCK)` names BLOCK as a type
        and doc.node_text(n) == b.name
        and n.start_byte != b.name_node.start_byte
        and not (b.decl.type != "preproc_def" and n.start_byte < b.decl.start_byte)
    ]


def _site_edits(
    doc: Document, k: Kernel, spec: KernelSpec, sites: tuple[LaunchSite, ...], change: LaunchChange
) -> tuple[tuple[TextEdit, ...], int]:
    """Edits of this file's launch sites of ``k`` for ``change``, and how many sites they cover:
    each size variable must be passed to the kernel as a scalar argument (``arg n = n``) so it has
    a host expression there.  Sites that cannot be translated are left alone.

    The launch keeps the user's names: a block written as a name bound to one declaration
    (``const int threads = 32;``, ``#define BLOCK 32``, ``dim3 block(32);``) stays that name and
    the declaration's value changes when only the rewritten launches (and their grid variables)
    use it, else one new constant next to it carries the new block; a grid written as a variable
    only these launches use gets the new value in its declaration; grids are written over the
    block's name and kept as they are when they already follow it."""
    params = [p.name for p in k.params]
    new = with_launch(spec, change)
    ready: list[tuple[LaunchSite, dict[str, str]]] = []
    for site in sites:
        names: dict[str, str] = {}
        for a in spec.args:
            if isinstance(a, ScalarSpec) and a.value in spec.sizes and a.name in params:
                i = params.index(a.name)
                if i < len(site.args):
                    node = _node(doc, site.args[i])
                    primary = node is not None and node.type in _PRIMARY
                    names[a.value] = site.args[i].text if primary else f"({site.args[i].text})"
        try:
            _spelled(new, names, None)
        except (KeyError, SyntaxError):
            log.info(
                "launch site at line %d not rewritten: its sizes have no host expression",
                site.span.start_line + 1,
            )
            continue
        ready.append((site, names))
    edits: list[TextEdit] = []
    grid_vars = {
        s.span.start_byte: g for s, _ in ready if (g := _grid_binding(doc, s, new, ready)) is not None
    }
    moved = new.block != spec.block  # the block changes (not only its spelling)
    block_names = _block_names(doc, k, new, moved, ready, grid_vars, edits)
    site_parts: list[tuple[LaunchSite, list[tuple[Expr | None, str]]]] = []
    for site, names in ready:
        block_name = block_names.get(site.span.start_byte)
        grid, block, smem = _spelled(new, names, block_name)
        parts: list[tuple[Expr | None, str]] = []
        g = grid_vars.get(site.span.start_byte)
        if (change.grid or change.block) and not _grid_follows(doc, spec, new, site, g, block_name):
            if g is not None:
                edits += _value_edits(doc, g, grid)
            else:
                parts.append((site.grid, grid[0] if len(grid) == 1 else f"dim3({', '.join(grid)})"))
        if moved and block_name is None:
            parts.append((site.block, block[0] if len(block) == 1 else f"dim3({', '.join(block)})"))
        elif moved and block_name is not None and block_name[1]:  # a new constant
            parts.append((site.block, block_name[0]))
        if change.shared:
            parts.append((site.shared, smem))
        site_parts.append((site, parts))
    for site, parts in site_parts:
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
    # one of each (sites sharing a declaration edit it alike); an insertion before a deletion at its place
    return tuple(sorted(dict.fromkeys(edits), key=lambda e: (e.start, e.end))), len(ready)


def _spelled(
    new: KernelSpec, names: dict[str, str], block_name: tuple[str, bool, bool] | None
) -> tuple[list[str], list[str], str]:
    """The launch's grid and block values and its shared memory in host code over ``names``, the
    block named ``block_name`` (name, new, dim3) where it has one (else spelled as its value)."""
    block = [_host(e, names) for e in new.block]
    if block_name is not None:
        name, _, dim3 = block_name
        axes = {f"block_{a}": f"{name}.{a}" if dim3 else name for a in "xyz"[: len(new.block)]}
    else:
        axes = {f"block_{a}": _operand(e, v) for a, e, v in zip("xyz", new.block, block, strict=False)}
    names_b = {**names, **axes, "block": axes["block_x"]}
    grid = [_host(e, names_b) for e in new.grid]
    return grid, block, _host(new.smem, names_b)


def _block_names(
    doc: Document,
    k: Kernel,
    new: KernelSpec,
    moved: bool,
    ready: list[tuple[LaunchSite, dict[str, str]]],
    grid_vars: dict[int, _Binding],
    edits: list[TextEdit],
) -> dict[int, tuple[str, bool, bool]]:
    """Each site's block name (name, whether it is a new constant, dim3), by the site's start
    byte, for the sites whose block is a name bound to one declaration; the edits of those
    declarations (a new value, or a new constant next to them) are added to ``edits``."""
    constant = all(not _names_in(e) for e in new.block)
    groups: dict[int, tuple[_Binding, list[LaunchSite]]] = {}
    for site, _ in ready:
        b = _binding(doc, site, site.block)
        if b is None or not (
            len(b.values) >= len(new.block) if b.dim3 else len(b.values) == len(new.block) == 1
        ):
            continue  # a dim3 spells each axis of the block, a number the one
        groups.setdefault(b.decl.start_byte, (b, []))[1].append(site)
    # where a use is the rewritten launches' own: their block and grid, their grid variables
    ours = [(s.block.span.start_byte, s.block.span.end_byte) for s, _ in ready if s.block is not None]
    ours += [(s.grid.span.start_byte, s.grid.span.end_byte) for s, _ in ready if s.grid is not None]
    ours += [(g.decl.start_byte, g.decl.end_byte) for g in grid_vars.values()]
    specs_text = [
        body.split(spec_mod.MARKER, 1)[1]
        for kernel in doc.kernels
        for _, body in kernel.comment
        if spec_mod.MARKER in body and body.split(spec_mod.MARKER, 1)[1].split()[:1] != ["launch"]
    ]
    out: dict[int, tuple[str, bool, bool]] = {}
    taken = {doc.node_text(n) for n in _identifiers(doc.tree.root_node)}
    for b, group in groups.values():
        name, fresh = b.name, False
        if moved:
            if not constant:
                continue  # a block over the sizes: spelled at each launch, where the sizes are
            block = [_host(e, {}) for e in new.block]
            block += ["1"] * (len(b.values) - len(block))  # dim3 block(32, 1): the axes it spells stay
            uses = _uses(doc, b, specs_text)
            if uses is not None and all(_inside(n, ours) for n in uses):
                edits += _value_edits(doc, b, block)
            else:
                made = _new_constant(doc, k, b, block, taken)
                if made is None:
                    continue
                name, fresh = made[0], True
                taken.add(name)
                edits.append(made[1])
        for site in group:
            out[site.span.start_byte] = (name, fresh, b.dim3)
    return out


def _names_in(expr: str) -> bool:
    return any(isinstance(n, ast.Name) for n in ast.walk(ast.parse(expr, mode="eval")))


def _value_edits(doc: Document, b: _Binding, values: list[str]) -> list[TextEdit]:
    """Edits giving ``b`` the new ``values`` (its initializer, dim3's arguments, the macro's body)."""
    out = []
    for node, text in zip(b.values, values, strict=True):
        old = doc.node_text(node)
        start = char_offset(doc, node.start_byte) + len(old) - len(old.lstrip())
        end = char_offset(doc, node.start_byte) + len(old.rstrip())
        if old.strip() != text:
            out.append(TextEdit(start, end, text))
    return out


def _new_constant(
    doc: Document, k: Kernel, b: _Binding, values: list[str], taken: set[str]
) -> tuple[str, TextEdit] | None:
    """A declaration like ``b``'s, of a new name (``vadd_threads``, ``VADD_BLOCK``) holding
    ``values``, on the line after ``b``'s; None when ``b`` shares its line or declares several."""
    if b.decl.type == "declaration" and len(b.decl.children_by_field_name("declarator")) != 1:
        return None
    start, end = char_offset(doc, b.decl.start_byte), char_offset(doc, b.decl.end_byte)
    line_start = doc.text.rfind("\n", 0, start) + 1
    line_end = doc.text.find("\n", end - 1)
    if doc.text[line_start:start].strip() or line_end < 0:
        return None
    after = doc.text[end:line_end].strip()
    if after and not after.startswith("//"):
        return None
    base = f"{k.name}_{b.name}"
    name = base.upper() if b.decl.type == "preproc_def" else base
    n = 2
    while name in taken:
        name, n = f"{base}_{n}", n + 1
    pieces = [(b.name_node, name), *zip(b.values, values, strict=True)]
    text, at = "", b.decl.start_byte
    for node, new_text in sorted(pieces, key=lambda p: p[0].start_byte):
        old = doc.node_text(node)
        lead = old[: len(old) - len(old.lstrip())]
        text += doc.data[at : node.start_byte].decode("utf-8", errors="replace") + lead + new_text
        at = node.start_byte + len(old.rstrip().encode())
    text += doc.data[at : b.decl.end_byte].decode("utf-8", errors="replace").rstrip("\n")
    return name, TextEdit(line_end + 1, line_end + 1, f"{doc.text[line_start:start]}{text}\n")


def _grid_binding(
    doc: Document, site: LaunchSite, new: KernelSpec, ready: list[tuple[LaunchSite, dict[str, str]]]
) -> _Binding | None:
    """The variable ``site``'s grid is written as (``int blocks = ...;``, ``dim3 grid(...);``) in
    its function, when only the rewritten launches use it, as their grid, and they pass the same
    sizes (so its new value is theirs alike)."""
    g = _binding(doc, site, site.grid)
    if g is None or g.scope.type == "translation_unit" or len(g.values) != (len(new.grid) if g.dim3 else 1):
        return None
    if not (g.dim3 or len(new.grid) == 1):
        return None
    grids = [(s.grid.span.start_byte, s.grid.span.end_byte) for s, _ in ready if s.grid is not None]
    uses = _uses(doc, g, [])
    users = [names for s, names in ready if s.grid is not None and _same(_binding(doc, s, s.grid), g)]
    if uses is None or not all(_inside(n, grids) for n in uses) or len(uses) != len(users):
        return None
    return g if all(names == users[0] for names in users) else None


def _same(a: _Binding | None, b: _Binding) -> bool:
    return a is not None and (a.decl.start_byte, a.name) == (b.decl.start_byte, b.name)


def _grid_follows(
    doc: Document,
    spec: KernelSpec,
    new: KernelSpec,
    site: LaunchSite,
    g: _Binding | None,
    block_name: tuple[str, bool, bool] | None,
) -> bool:
    """Whether ``site``'s grid stays right as written: the spec's grid is unchanged and the site
    writes it without the block or over the block's name, which stays (its value changes, or none)."""
    if new.grid != spec.grid:
        return False
    if not any(
        n.id in ("block", "block_x", "block_y", "block_z")
        for e in new.grid
        for n in ast.walk(ast.parse(e, mode="eval"))
        if isinstance(n, ast.Name)
    ):
        return True
    if block_name is None or block_name[1] or site.grid is None:
        return False
    where = g.values if g is not None else (_node(doc, site.grid),)
    return any(doc.node_text(n) == block_name[0] for v in where for n in _identifiers(v))


def _dead_declarations(
    doc: Document, site: LaunchSite, replaced: list[Expr], new_text: str
) -> list[TextEdit]:
    """Edits deleting the local declarations (``const int per = 32;``, each on a line of its
    own) that only the replaced launch expressions of ``site`` used, directly or through another
    declaration deleted here."""
    if not replaced or site.caller_span is None:
        return []
    root = doc.tree.root_node
    fn = root.descendant_for_byte_range(site.caller_span.start_byte, site.caller_span.end_byte)
    if fn is None:
        return []
    written = Parsed(new_text)
    kept = {t.text for t, _, _ in macros.tokens(written, written.tree.root_node)}
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
    return [n for n in _descendants(node) if n.type == "identifier"] if node is not None else []


def _descendants(node: tree_sitter.Node, skip: tuple[str, ...] = ()) -> list[tree_sitter.Node]:
    """``node`` and the nodes under it, not entering those of the types in ``skip``."""
    out, stack = [], [node]
    while stack:
        n = stack.pop()
        out.append(n)
        if n is node or n.type not in skip:
            stack.extend(n.children)
    return out
