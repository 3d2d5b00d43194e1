"""The normalizing front end: what the compiler resolves, resolved before the view reads a kernel.

Real kernels spell one computation many ways; the passes match computations.  Between a
:class:`~engine.Subject` and its :class:`~engine.view.KernelView` this module
resolves, on tree-sitter trees (no regexes over text):

- **names** (:class:`Context`, read from the kernel's standalone unit, ``subject.context``):
  integer ``#define``\\ s, ``constexpr``/``static const``/``const`` integers and the kernel's
  value template parameters (from the spec's ``template`` line) become constants the index
  expander folds; ``typedef``/``using`` aliases and type template parameters become canonical
  element types (:meth:`Context.element_type`, read through ``view.element_type(name)``);
  wrappers of ``extern __shared__`` (the ``SharedMemory<T>()`` idiom) are known by name;
- **text** (:func:`normalize`, a semantics-preserving rewrite of the kernel's definition, done
  before a pass matches, so the rewrite builds on it): calls of ``__device__`` functions of the
  unit — also one reached through a template argument (``trimul<matmul_tri_naive>``) — are
  inlined (``f(args);``, ``lhs = f(args);`` and ``T v = f(args);`` where ``f`` ends in its only
  ``return e;``); ``int i; for (i = 0; ...)`` loops whose variable lives only in its loops get
  the declaration (``for (int i = 0; ...)``); ``T k = a; while (k < n) { ...; k++; }`` becomes
  the ``for`` loop it is.

Scopes (a local redeclared in a sibling block is a new variable) and the spellings of barriers
(``__syncthreads()``, ``cg::sync(cta)``, ``cta.sync()``, ``this_thread_block().sync()``) are
resolved in the view itself (:mod:`engine.view`).
"""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

import tree_sitter

from cudasrc.macros import Macro, definitions, expansions
from cudasrc.scan import leaves, macro_integer
from cudasrc.source import Document
from cudasrc.specs import KernelSpec, evaluate
from cudasrc.syntax import Kernel

Node = tree_sitter.Node
_EFFECTS = ("call_expression", "assignment_expression", "update_expression")
MAX_INLINE = 4  # rounds of normalization (nested device functions)


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


def _macro_value(text: str, constants: dict[str, int]) -> int | None:
    """A ``#define``'s (or a template argument's) value when it is an integer expression: C
    folded by the source model, else a spec-style expression (e.g. a call of ``min``)."""
    v = macro_integer(text, constants)
    if v is not None:
        return v
    try:
        value = evaluate(text.strip(), constants)
    except ValueError:
        return None
    return value if isinstance(value, int) else None


@dataclass(frozen=True)
class Function:
    """A ``__device__`` function of the unit: what inlining needs."""

    name: str
    returns: str  # the return type's text ("void", "float" ...)
    params: tuple[tuple[str, str], ...]  # (declaration text, name)
    doc: Document = field(compare=False)
    node: Node = field(compare=False)  # the body


@dataclass(frozen=True)
class Context:
    """The names the kernel's unit defines, resolved (see the module docstring)."""

    constants: dict[str, int] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)  # alias or type parameter -> canonical type
    functions: dict[str, Function] = field(default_factory=dict)
    shared_wrappers: frozenset[str] = frozenset()  # names whose call returns dynamic shared memory
    macros: dict[str, Macro] = field(default_factory=dict)  # the unit's #defines (cudasrc.macros)

    def expands(self, name: str) -> bool:
        """Whether the macro ``name``, written in a kernel, expands in the normalized text:
        function-like ones and object-like ones other than the integer constants the view folds
        (those stay atoms, as written)."""
        m = self.macros.get(name)
        return m is not None and (m.params is not None or name not in self.constants)

    def canonical(self, type_text: str) -> str:
        """``type_text`` without qualifiers, pointers and ``__restrict__``, aliases resolved:
        ``const floatX* __restrict__`` -> ``__nv_bfloat16``."""
        t = _bare(type_text)
        for _ in range(8):  # chains of aliases; a cycle stops here
            if t not in self.types or _bare(self.types[t]) == t:
                break
            t = _bare(self.types[t])
        return t


def _bare(type_text: str) -> str:
    words = type_text.replace("*", " ").replace("&", " ").split()
    drop = ("const", "volatile", "__restrict__", "__restrict", "restrict", "struct")
    return " ".join(w for w in words if w not in drop).removeprefix("std::")


class Unit(Protocol):
    """What the front end reads of a kernel under rewrite (:class:`engine.Subject` is one;
    a protocol, so that this module does not import the one that builds on it)."""

    @property
    def code(self) -> str: ...
    @property
    def context(self) -> str: ...
    @property
    def spec(self) -> KernelSpec: ...
    @property
    def kernel(self) -> Kernel: ...
    @property
    def front(self) -> Context: ...


def context_of(subject: Unit) -> Context:
    """The :class:`Context` of ``subject``: its unit (``subject.context``, else its own code) and
    its kernel's template parameters bound to the spec's ``template`` arguments."""
    unit = _unit_context(subject.context or subject.code)
    constants, types, functions = dict(unit.constants), dict(unit.types), dict(unit.functions)
    for tp, arg in zip(subject.kernel.template_params, subject.spec.template_args, strict=False):
        if tp.kind == "type":
            types[tp.name] = arg
        elif (folded := _macro_value(arg, constants)) is not None:
            constants[tp.name] = folded
        elif arg in functions:
            functions[tp.name] = functions[arg]
    return Context(constants, types, functions, unit.shared_wrappers, unit.macros)


@functools.lru_cache(maxsize=16)
def _unit_context(text: str) -> Context:
    """What a unit defines (read once per unit: every subject of a search shares it)."""
    doc = Document(text)
    constants = dict(doc.integer_constants)
    functions: dict[str, Function] = {}
    wrappers: set[str] = set()
    for n in _walk(doc.tree.root_node):
        if n.type == "preproc_def":  # what the C folding left: spec-style macro values
            name, value = n.child_by_field_name("name"), n.child_by_field_name("value")
            if name is not None and value is not None and doc.node_text(name) not in constants:
                v = _macro_value(doc.node_text(value), constants)
                if v is not None:
                    constants[doc.node_text(name)] = v
        elif n.type == "function_definition":
            fn = _device_function(doc, n)
            if fn is not None:
                functions.setdefault(fn.name, fn)
        if n.type == "declaration" and {"extern", "__shared__"} <= set(leaves(doc, n)):
            owner = _owner(doc, n)
            if owner:
                wrappers.add(owner)
    return Context(constants, dict(doc.type_aliases), functions, frozenset(wrappers), definitions(doc))


def _owner(doc: Document, n: Node) -> str:
    """The struct (``SharedMemory<T>``, whose conversion operator holds ``n``) or else the
    function whose body holds ``n``."""
    function = ""
    up = n.parent
    while up is not None:
        if up.type in ("struct_specifier", "class_specifier"):
            name = up.child_by_field_name("name")
            return doc.node_text(name) if name is not None else function
        if up.type == "function_definition" and not function:
            d = up.child_by_field_name("declarator")
            name = d.child_by_field_name("declarator") if d is not None else None
            function = doc.node_text(name) if name is not None else ""
        up = up.parent
    return function


def _device_function(doc: Document, n: Node) -> Function | None:
    """A ``__device__`` (not ``__global__``) function definition: not a template, unless its body
    is empty (``template <class T> __device__ void unused(T&&) {}``: its calls inline to nothing)."""
    body = n.child_by_field_name("body")
    empty = body is not None and not _statements(body)
    if n.parent is not None and n.parent.type == "template_declaration" and not empty:
        return None
    words = {w for c in n.children if c.type != "compound_statement" for w in leaves(doc, c)}
    if "__device__" not in words or "__global__" in words:
        return None
    decl, body, ty = (
        n.child_by_field_name("declarator"),
        n.child_by_field_name("body"),
        n.child_by_field_name("type"),
    )
    if decl is None or body is None or ty is None or decl.type != "function_declarator":
        return None
    name = decl.child_by_field_name("declarator")
    plist = decl.child_by_field_name("parameters")
    if name is None or name.type != "identifier" or plist is None:
        return None
    params: list[tuple[str, str]] = []
    for p in plist.named_children:
        if p.type != "parameter_declaration":
            return None
        d = p.child_by_field_name("declarator")
        while d is not None and d.type in ("pointer_declarator", "reference_declarator"):
            d = d.child_by_field_name("declarator") or (d.named_children[-1] if d.named_children else None)
        if (d is None or d.type != "identifier") and not empty:
            return None
        params.append(
            (doc.node_text(p), doc.node_text(d) if d is not None and d.type == "identifier" else "")
        )
    return Function(doc.node_text(name), doc.node_text(ty), tuple(params), doc, body)


# --------------------------------------------------------------------------------------- text


def normalized_code(subject: Unit) -> str:
    """``subject``'s definition normalized (device functions inlined, loop variables declared by
    their loops, ``while`` loops as ``for`` loops); its own code when nothing changes.  Each step
    keeps the kernel's meaning (:attr:`engine.Subject.normalized` keeps the result only
    where it still holds the kernel)."""
    ctx = subject.front
    code = subject.code
    for _ in range(MAX_INLINE):
        new = _normalized_once(code, ctx)
        if new == code:
            break
        code = new
    return code


def _normalized_once(code: str, ctx: Context) -> str:
    doc = Document(code)
    if not doc.kernels or doc.kernels[-1].body_span is None:
        return code
    span = doc.kernels[-1].body_span
    body = doc.tree.root_node.named_descendant_for_byte_range(span.start_byte, span.end_byte)
    if body is None:
        return code
    expanded = expansions(doc, body, ctx.macros, ctx.expands)  # before the parse: macros may break it
    if expanded:
        return _apply(doc, expanded)
    if doc.tree.root_node.has_error:
        return code
    names = {doc.node_text(n) for n in _walk(body) if n.type == "identifier"}
    for step in (_inline, _late_init, _hoisted_loops, _while_loops, _template_misparse):
        edits = step(doc, body, ctx, names)
        if edits:
            return _apply(doc, edits)
    return code


def expanded_lines(subject: Unit) -> dict[str, str]:
    """The lines of ``subject``'s kernel body that hold macro invocations, as the normalization
    expands them -> as written (both stripped): every invocation on the line, none spanning lines."""
    doc = Document(subject.code)
    if not doc.kernels or doc.kernels[-1].body_span is None:
        return {}
    span = doc.kernels[-1].body_span
    body = doc.tree.root_node.named_descendant_for_byte_range(span.start_byte, span.end_byte)
    if body is None:
        return {}
    ctx = subject.front
    by_line: dict[int, list[tuple[int, int, str]]] = {}
    spanning = set()  # lines an invocation runs past: not restored
    for start, end, text in expansions(doc, body, ctx.macros, ctx.expands):
        row = doc.data.count(b"\n", 0, start)
        by_line.setdefault(row, []).append((start, end, text))
        if b"\n" in doc.data[start:end]:
            spanning.add(row)
    out = {}
    for edits in (e for row, e in by_line.items() if row not in spanning):
        first = doc.data.rfind(b"\n", 0, edits[0][0]) + 1
        last = doc.data.find(b"\n", edits[-1][1])
        last = len(doc.data) if last < 0 else last
        line, pos = [], first
        for start, end, text in edits:
            line += [doc.data[pos:start], text.encode()]
            pos = end
        line.append(doc.data[pos:last])
        written = doc.data[first:last].decode("utf-8", "replace").strip()
        out[b"".join(line).decode("utf-8", "replace").strip()] = written
    return out


def _apply(doc: Document, edits: list[tuple[int, int, str]]) -> str:
    out, pos = [], 0
    for start, end, text in sorted(_whole_lines(doc, e) for e in edits):
        if start < pos:
            continue  # one edit per region and round; the next round sees the rest
        out += [doc.data[pos:start], text.encode()]
        pos = end
    out.append(doc.data[pos:])
    return b"".join(out).decode("utf-8", errors="replace")


def _whole_lines(doc: Document, edit: tuple[int, int, str]) -> tuple[int, int, str]:
    """A deletion of everything on its lines takes the lines (indentation and newline) too."""
    start, end, text = edit
    if text:
        return edit
    line_start = doc.data.rfind(b"\n", 0, start) + 1
    line_end = doc.data.find(b"\n", end)
    if line_end < 0 or doc.data[line_start:start].strip() or doc.data[end:line_end].strip():
        return edit
    return line_start, line_end + 1, ""


def _statements(node: Node) -> list[Node]:
    return [c for c in node.named_children if c.type != "comment"]


def _inline(doc: Document, body: Node, ctx: Context, names: set[str]) -> list[tuple[int, int, str]]:
    for n in _walk(body):
        if n.type != "call_expression":
            continue
        fn_node = n.child_by_field_name("function")
        fn = ctx.functions.get(doc.node_text(fn_node)) if fn_node is not None else None
        args = n.child_by_field_name("arguments")
        stmt = n.parent
        if fn is None or args is None or stmt is None or len(args.named_children) != len(fn.params):
            continue
        target, declared = "", ""
        if stmt.type == "assignment_expression" and stmt.child_by_field_name("right") == n:
            op = stmt.child_by_field_name("operator")
            left = stmt.child_by_field_name("left")
            if op is None or doc.node_text(op) != "=" or left is None:
                continue
            target, stmt = doc.node_text(left), stmt.parent
        elif stmt.type == "init_declarator" and stmt.child_by_field_name("value") == n:
            decl, name = stmt.parent, stmt.child_by_field_name("declarator")
            ty = decl.child_by_field_name("type") if decl is not None else None
            if (
                decl is None
                or ty is None
                or name is None
                or len(decl.children_by_field_name("declarator")) != 1
            ):
                continue
            quals = " ".join(
                doc.node_text(c)
                for c in decl.children
                if c.type == "type_qualifier" and doc.node_text(c) != "const"
            )
            declared = f"{quals} {doc.node_text(ty)} {doc.node_text(name)};".strip()
            target, stmt = doc.node_text(name), decl
        if stmt is None or stmt.type not in ("expression_statement", "declaration"):
            continue
        if not _statements(fn.node) and not target:  # an empty function: nothing to run
            if not any(x.type in _EFFECTS for x in _walk(args)):
                return [(stmt.start_byte, stmt.end_byte, "")]
            if not all(name for _, name in fn.params):
                continue  # an unnamed parameter cannot hold the argument's effects
        text = _inlined(
            fn,
            [doc.node_text(a) for a in args.named_children],
            target,
            names,
            stmt == _statements(body)[-1],
            _indent(doc, stmt),
        )
        if text is None:
            continue
        return [
            (stmt.start_byte, stmt.end_byte, f"{declared}\n{_indent(doc, stmt)}{text}" if declared else text)
        ]
    return []


def _indent(doc: Document, node: Node) -> str:
    line = doc.line_bytes(node.start_point.row).decode("utf-8", errors="replace")
    return line[: len(line) - len(line.lstrip())]


def _inlined(fn: Function, args: list[str], target: str, names: set[str], last: bool, ind: str) -> str | None:
    """The body of ``fn`` as a block: parameters bound to ``args`` (renamed where they would
    capture a name of the caller), ``return e;`` -> ``target = e;`` (its last statement only)."""
    doc, body = fn.doc, fn.node
    stmts = _statements(body)
    returns = [n for n in _walk(body) if n.type == "return_statement"]
    final = stmts[-1] if stmts else None
    if target:
        if fn.returns.strip() == "void" or len(returns) != 1 or final is None or returns[0] != final:
            return None
        value = final.named_children[0] if final.named_child_count else None
        if value is None:
            return None
    elif fn.returns.strip() != "void" or (returns and not last):
        return None  # a return inside the body would leave the kernel, not the function
    local = {doc.node_text(n) for n in _walk(body) if n.type == "identifier"}
    renames: dict[str, str] = {}
    binds: list[str] = []
    changed = set()  # parameters the body assigns or takes the address of: always their own copies
    for n in _walk(body):
        lhs = None
        if n.type in ("assignment_expression", "update_expression"):
            lhs = n.child_by_field_name("left") or n.child_by_field_name("argument")
        elif n.type == "pointer_expression" and n.children[0].type == "&":
            lhs = n.child_by_field_name("argument")
        if lhs is not None and lhs.type == "identifier":
            changed.add(doc.node_text(lhs))
    for (decl, pname), arg in zip(fn.params, args, strict=True):
        if arg == pname and pname not in changed:
            continue
        new = pname
        if pname in names:
            k = 2
            while f"{pname}_{k}" in names | local:
                k += 1
            new = renames[pname] = f"{pname}_{k}"
        binds.append(_rebind(decl, pname, new) + f" = {arg};")
    edits: list[tuple[int, int, str]] = []
    for n in _walk(body):
        if n.type == "identifier" and doc.node_text(n) in renames:
            edits.append((n.start_byte, n.end_byte, renames[doc.node_text(n)]))
    if target and final is not None and value is not None:
        edits.append((final.start_byte, value.start_byte, f"{target} = "))
    data = doc.data[body.start_byte : body.end_byte]
    out, pos = [], 0
    for start, end, text in sorted(edits):
        out += [data[pos : start - body.start_byte], text.encode()]
        pos = end - body.start_byte
    out.append(data[pos:])
    inner = textwrap.dedent(b"".join(out).decode("utf-8", errors="replace")[1:-1].strip("\n"))
    lines = [*binds, *inner.split("\n")]
    body_text = "".join(f"{ind}    {line}\n" if line.strip() else "\n" for line in lines)
    return f"{{  // cuda-agent: {fn.name} inlined\n{body_text}{ind}}}"


def _rebind(decl: str, old: str, new: str) -> str:
    """A parameter declaration's text with its name changed (``const float* q`` -> ``... q_2``)."""
    d = Document(decl + ";")
    for n in _walk(d.tree.root_node):
        if n.type == "identifier" and d.node_text(n) == old:
            return decl[: n.start_byte] + new + decl[n.end_byte :]
    return decl


def _late_init(doc: Document, body: Node, ctx: Context, names: set[str]) -> list[tuple[int, int, str]]:
    """``int r; ... r = e;``: the declaration moves to the assignment (``int r = e;``) when that
    is the first use of ``r`` and every later use is in the assignment's block."""
    for decl in (n for n in _walk(body) if n.type == "declaration"):
        ty = decl.child_by_field_name("type")
        if (
            ty is None
            or decl.parent is None
            or any(c.type == "storage_class_specifier" for c in decl.children)
        ):
            continue
        declarators = decl.children_by_field_name("declarator")
        for d in declarators:
            if d.type != "identifier":
                continue
            name = doc.node_text(d)
            uses = [
                n
                for n in _walk(decl.parent)
                if n.type == "identifier" and doc.node_text(n) == name and n.start_byte > decl.end_byte
            ]
            first = uses[0] if uses else None
            assign = first.parent if first is not None else None
            stmt = assign.parent if assign is not None else None
            if (
                first is None
                or assign is None
                or stmt is None
                or assign.type != "assignment_expression"
                or assign.child_by_field_name("left") != first
                or doc.node_text(assign.child_by_field_name("operator") or assign) != "="
                or stmt.type != "expression_statement"
                or stmt.parent is None
                or stmt.parent.type != "compound_statement"
            ):
                continue
            block = stmt.parent
            if any(not (block.start_byte <= u.start_byte < block.end_byte) for u in uses):
                continue
            if name in leaves(doc, assign.child_by_field_name("right") or assign):
                continue
            quals = " ".join(doc.node_text(c) for c in decl.children if c.type == "type_qualifier")
            rest = [doc.node_text(x) for x in declarators if x != d]
            kept = f"{quals} {doc.node_text(ty)} {', '.join(rest)};".strip() if rest else ""
            return [
                (decl.start_byte, decl.end_byte, kept),
                (
                    stmt.start_byte,
                    stmt.end_byte,
                    f"{quals} {doc.node_text(ty)} {doc.node_text(assign)};".strip(),
                ),
            ]
    return []


def _hoisted_loops(doc: Document, body: Node, ctx: Context, names: set[str]) -> list[tuple[int, int, str]]:
    """``int i; ... for (i = 0; ...)``: the loop declares ``i`` when ``i`` lives only in loops
    that start by assigning it."""
    for decl in (n for n in _walk(body) if n.type == "declaration"):
        ty = decl.child_by_field_name("type")
        declarators = decl.children_by_field_name("declarator")
        if (
            ty is None
            or decl.parent is None
            or any(c.type in ("storage_class_specifier",) for c in decl.children)
        ):
            continue
        for d in declarators:
            if d.type not in ("identifier", "init_declarator"):
                continue
            name_node = d if d.type == "identifier" else d.child_by_field_name("declarator")
            if name_node is None or name_node.type != "identifier":
                continue
            if any(x.type in _EFFECTS for x in _walk(d)):
                continue  # dropping the initialiser would drop its side effects
            name = doc.node_text(name_node)
            loops = _owning_loops(doc, decl.parent, name, name_node)
            if not loops:
                continue
            edits = []
            for loop in loops:
                init = loop.child_by_field_name("initializer")
                assert init is not None
                edits.append((init.start_byte, init.start_byte, f"{doc.node_text(ty)} "))
            rest = [doc.node_text(x) for x in declarators if x != d]
            quals = " ".join(doc.node_text(c) for c in decl.children if c.type == "type_qualifier")
            kept = f"{quals} {doc.node_text(ty)} {', '.join(rest)};".strip() if rest else ""
            edits.append((decl.start_byte, decl.end_byte, kept))
            return edits
    return []


def _owning_loops(doc: Document, scope: Node, name: str, declarator: Node) -> list[Node]:
    """The ``for`` loops of ``scope`` whose initializer is ``name = ...`` when every other use
    of ``name`` is inside one of them (after its initializer); [] otherwise."""
    loops = []
    for n in _walk(scope):
        if n.type == "for_statement":
            init = n.child_by_field_name("initializer")
            left = (
                init.child_by_field_name("left")
                if init is not None and init.type == "assignment_expression"
                else None
            )
            op = (
                init.child_by_field_name("operator")
                if init is not None and init.type == "assignment_expression"
                else None
            )
            if (
                left is not None
                and op is not None
                and doc.node_text(left) == name
                and doc.node_text(op) == "="
            ):
                loops.append(n)
    if not loops:
        return []
    for n in _walk(scope):
        if n.type != "identifier" or doc.node_text(n) != name or n == declarator:
            continue
        owner = next(
            (lp for lp in loops if lp.start_byte <= n.start_byte and n.end_byte <= lp.end_byte), None
        )
        if owner is None:
            return []
        init = owner.child_by_field_name("initializer")
        assert init is not None
        if init.start_byte <= n.start_byte < init.end_byte and init.child_by_field_name("left") != n:
            return []  # `i = i + 1` as the initializer reads the earlier value
        if any(_declares(doc, x, name) for x in _walk(owner)):
            return []  # redeclared inside: leave such code alone
    return loops


def _declares(doc: Document, node: Node, name: str) -> bool:
    """Whether ``node`` is a declaration of ``name``."""
    if node.type != "declaration":
        return False
    for declarator in node.children_by_field_name("declarator"):
        d: Node | None = declarator
        while d is not None and d.type in ("init_declarator", "pointer_declarator", "array_declarator"):
            d = d.child_by_field_name("declarator")
        if d is not None and doc.node_text(d) == name:
            return True
    return False


def _while_loops(doc: Document, body: Node, ctx: Context, names: set[str]) -> list[tuple[int, int, str]]:
    """``T k = a; while (k < n) { ...; k++; }`` -> ``for (T k = a; k < n; k++) { ... }`` when
    ``k`` is used nowhere else and the body neither ``continue``\\ s nor declares ``k``."""
    for w in (n for n in _walk(body) if n.type == "while_statement"):
        prev = w.prev_named_sibling
        cond, loop_body = w.child_by_field_name("condition"), w.child_by_field_name("body")
        if prev is None or prev.type != "declaration" or cond is None or loop_body is None:
            continue
        if loop_body.type != "compound_statement" or len(prev.children_by_field_name("declarator")) != 1:
            continue
        d = prev.children_by_field_name("declarator")[0]
        name_node = d.child_by_field_name("declarator") if d.type == "init_declarator" else None
        if name_node is None or name_node.type != "identifier":
            continue
        name = doc.node_text(name_node)
        stmts = _statements(loop_body)
        last = (
            stmts[-1].named_children[0]
            if stmts and stmts[-1].type == "expression_statement" and stmts[-1].named_children
            else None
        )
        if last is None or last.type not in ("update_expression", "assignment_expression"):
            continue
        target = last.child_by_field_name("argument") or last.child_by_field_name("left")
        if target is None or doc.node_text(target) != name:
            continue
        if name not in leaves(doc, cond) or any(n.type == "continue_statement" for n in _walk(loop_body)):
            continue
        uses = [n for n in _walk(w.parent or body) if n.type == "identifier" and doc.node_text(n) == name]
        if any(not (w.start_byte <= u.start_byte < w.end_byte) and u != name_node for u in uses):
            continue
        if any(
            x.type in ("assignment_expression", "update_expression")
            and x != last
            and doc.node_text(x.child_by_field_name("left") or x.child_by_field_name("argument") or x) == name
            for x in _walk(loop_body)
        ):
            continue
        inner = doc.data[loop_body.start_byte + 1 : stmts[-1].start_byte].decode("utf-8", "replace").rstrip()
        head = f"for ({doc.node_text(prev).rstrip(';').strip()}; {doc.node_text(cond)[1:-1].strip()}; {doc.node_text(last)})"
        return [
            (prev.start_byte, prev.end_byte, ""),
            (w.start_byte, w.end_byte, f"{head} {{{inner}\n{_indent(doc, w)}}}"),
        ]
    return []


def _template_misparse(
    doc: Document, body: Node, ctx: Context, names: set[str]
) -> list[tuple[int, int, str]]:
    """``a >= 0 && a < n && b >= 0`` read by tree-sitter as a template argument list
    (``a < n && b >`` ... ``= 0``: an assignment whose left ends in ``>`` or ``<`` right before its
    ``=``, which C++ cannot mean): the condition's ``&&``/``||`` operands parenthesized, so that each
    comparison parses as one."""
    for n in _walk(body):
        if n.type != "assignment_expression":
            continue
        left, op = n.child_by_field_name("left"), n.child_by_field_name("operator")
        last = next((c for c in reversed(list(_walk(left))) if c.child_count == 0), None) if left else None
        if op is None or doc.node_text(op) != "=" or last is None or doc.node_text(last) not in ("<", ">"):
            continue
        if last.end_byte != op.start_byte:
            continue
        top = n
        while top.parent is not None and top.parent.type in ("binary_expression", "assignment_expression"):
            top = top.parent
        holder = top.parent
        while holder is not None and holder.type == "parenthesized_expression":
            holder = holder.parent
        if holder is None or holder.type not in (
            "condition_clause",
            "conditional_expression",
            "for_statement",
        ):
            continue  # only a condition: `ok = a >= 0 && ...` assigns, and is left alone
        tokens = [c for c in _walk(top) if c.child_count == 0]
        if any(  # a real assignment (an `=` not glued to a `<` or `>`) inside: leave it alone
            doc.node_text(t) == "="
            and (
                i == 0
                or tokens[i - 1].end_byte != t.start_byte
                or doc.node_text(tokens[i - 1]) not in ("<", ">")
            )
            for i, t in enumerate(tokens)
        ):
            continue
        parts: list[list[str]] = [[]]
        depth = 0
        for i, tok in enumerate(tokens):
            text = doc.node_text(tok)
            if text in ("(", "[", "{"):
                depth += 1
            elif text in (")", "]", "}"):
                depth -= 1
            if depth == 0 and text in ("&&", "||"):
                parts += [[text], []]
                continue
            glued = i > 0 and tokens[i - 1].end_byte == tok.start_byte and text == "="
            if glued and parts[-1]:
                parts[-1][-1] += text
            else:
                parts[-1].append(text)
        rebuilt = " ".join(" ".join(p) if p in (["&&"], ["||"]) else f"({' '.join(p)})" for p in parts if p)
        return [(top.start_byte, top.end_byte, rebuilt)]
    return []
