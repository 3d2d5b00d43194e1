"""Declarative matching: patterns with named captures over the kernel view.

A pass states the *shape* of the code it rewrites as a pattern value built from the classes
below, and keeps only what cannot be said as a shape (e.g. "every access of the step is at
``tid`` or ``tid + s``") as a predicate over the captures.  The tree reduction a warp-shuffle
pass rewrites reads::

    TREE = For(
        "s",
        cond=Bin(">", Var("s"), Poly({})),
        update=HALVES,
        body=Block(
            If(Bin("<", Poly(TID, free=("s",)) @ "tid", Var("s")), then=Block(Stmt(ANY) @ "step")),
            BARRIER,
        ),
    )

and ``find(view, TREE)`` answers the captures (``{"s": "s", "tid": <node>, "step": <node>,
"loop": <Loop>}``) of the first loop of the kernel it matches, or None.

Matching works on the normalized tree-sitter tree through the view, so spellings do not matter:

- parentheses and comments are skipped; a statement block matches one statement or ``{...}``;
- comparisons match either way round (``a < b`` is ``b > a``) and ``+ * == != && ||`` either
  operand order;
- :class:`Poly` compares an expression's canonical index polynomial (locals substituted, casts
  dropped, macros and constants folded: :class:`~engine.view.Expander`), with atoms
  ``$name`` standing for captured names (``{("$s",): 2}`` is ``2 * s``); names listed in ``free``
  (captured loop variables) are atoms of their own;
- :class:`Var` binds an identifier's text the first time and must see the same text after
  (unification); ``pattern @ "name"`` captures the node a pattern matched; :class:`Sub` is an
  access ``array[index]`` (``Sub(Var("x"), Poly({("threadIdx.x",): 1}))``);
- :class:`For` matches the view's :class:`~engine.view.Loop` (a loop variable declared
  by the loop or before it, ``while`` loops normalized into ``for`` loops by the front end) and
  captures it as ``loop``; :data:`BARRIER` is a block barrier in any spelling the view knows.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import tree_sitter

from engine.view import KernelView, statements, unparenthesized
from engine.view import Poly as PolyValue

Node = tree_sitter.Node
Captures = dict[str, Any]

_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}
_COMMUTES = frozenset({"+", "*", "==", "!=", "&&", "||", "&", "|", "^"})


class Pattern(abc.ABC):
    """A shape of code; :meth:`match` answers the captures extended by it, or None."""

    @abc.abstractmethod
    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None: ...

    def __or__(self, other: Pattern) -> Pattern:
        return Either((self, other))

    def __matmul__(self, name: str) -> Pattern:
        return Capture(self, name)

    def where(self, predicate: Callable[[KernelView, Captures], bool]) -> Pattern:
        """This pattern, kept only where ``predicate(view, captures)`` holds."""
        return Where(self, predicate)


@dataclass(frozen=True)
class Any_(Pattern):
    """Any node that is present."""

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        return caps if node is not None else None


ANY = Any_()


@dataclass(frozen=True)
class Capture(Pattern):
    inner: Pattern
    name: str

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        out = self.inner.match(view, node, caps)
        return {**out, self.name: unparenthesized(node)} if out is not None else None


@dataclass(frozen=True)
class Either(Pattern):
    options: tuple[Pattern, ...]

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        for p in self.options:
            out = p.match(view, node, caps)
            if out is not None:
                return out
        return None

    def __or__(self, other: Pattern) -> Pattern:
        return Either((*self.options, other))


@dataclass(frozen=True)
class Where(Pattern):
    inner: Pattern
    predicate: Callable[[KernelView, Captures], bool]

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        out = self.inner.match(view, node, caps)
        return out if out is not None and self.predicate(view, out) else None


@dataclass(frozen=True)
class Var(Pattern):
    """An identifier, bound to ``name`` (the same text wherever ``name`` appears)."""

    name: str

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        node = unparenthesized(node)
        if node is None or node.type != "identifier":
            return None
        text = view.text(node)
        if self.name in caps:
            return caps if caps[self.name] == text else None
        return {**caps, self.name: text}


@dataclass(frozen=True)
class Lit(Pattern):
    """An expression spelled ``text`` (spacing and parentheses aside): ``Lit("blockDim.x")``."""

    text: str

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        node = unparenthesized(node)
        return caps if node is not None and "".join(view.tokens(node)) == self.text else None


@dataclass(frozen=True)
class Poly(Pattern):
    """An expression whose canonical polynomial is ``value`` (``$name`` atoms: captured names;
    ``free``: captured names that are atoms of their own, such as loop variables)."""

    value: PolyValue
    free: tuple[str, ...] = ()

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        node = unparenthesized(node)
        if node is None or any(f not in caps for f in self.free):
            return None
        want = {
            tuple(sorted(caps.get(a[1:], a) if a.startswith("$") else a for a in m)): c
            for m, c in self.value.items()
        }
        got = view.poly(node, frozenset(caps[f] for f in self.free))
        return caps if got == want else None


def _fields(node: Node, *names: str) -> list[Node | None]:
    return [node.child_by_field_name(n) for n in names]


@dataclass(frozen=True)
class Bin(Pattern):
    """A binary expression with operator ``op`` (comparisons either way round, commutative
    operators in either operand order)."""

    op: str
    left: Pattern
    right: Pattern

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        node = unparenthesized(node)
        if node is None or node.type != "binary_expression":
            return None
        left, op, right = _fields(node, "left", "operator", "right")
        o = view.text(op) if op is not None else ""
        tries = []
        if o == self.op:
            tries.append((left, right))
        if (o == self.op and o in _COMMUTES) or (o != self.op and _FLIP.get(o) == self.op):
            tries.append((right, left))
        for a, b in tries:
            out = self.left.match(view, a, caps)
            out = self.right.match(view, b, out) if out is not None else None
            if out is not None:
                return out
        return None


@dataclass(frozen=True)
class Assign(Pattern):
    """``left OP right`` (``=``, ``+=``, ``>>=`` ...)."""

    op: str
    left: Pattern
    right: Pattern

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        node = unparenthesized(node)
        if node is None or node.type != "assignment_expression":
            return None
        left, op, right = _fields(node, "left", "operator", "right")
        if op is None or view.text(op) != self.op:
            return None
        out = self.left.match(view, left, caps)
        return self.right.match(view, right, out) if out is not None else None


@dataclass(frozen=True)
class Sub(Pattern):
    """``array[index]``."""

    array: Pattern
    index: Pattern

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        node = unparenthesized(node)
        if node is None or node.type != "subscript_expression":
            return None
        indices = node.child_by_field_name("indices")
        if indices is None or indices.named_child_count != 1:
            return None
        out = self.array.match(view, node.child_by_field_name("argument"), caps)
        return self.index.match(view, indices.named_children[0], out) if out is not None else None


@dataclass(frozen=True)
class Stmt(Pattern):
    """An expression statement whose expression matches."""

    expr: Pattern

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        if node is None or node.type != "expression_statement" or node.named_child_count != 1:
            return None
        return self.expr.match(view, node.named_children[0], caps)


@dataclass(frozen=True)
class Block(Pattern):
    """Exactly these statements (a single statement, or ``{...}``; comments skipped)."""

    items: tuple[Pattern, ...]

    def __init__(self, *items: Pattern) -> None:
        object.__setattr__(self, "items", items)

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        if node is None:
            return None
        body = statements(node)
        if len(body) != len(self.items):
            return None
        out: Captures | None = caps
        for p, s in zip(self.items, body, strict=True):
            out = p.match(view, s, out) if out is not None else None
        return out


@dataclass(frozen=True)
class If(Pattern):
    """``if (cond) then`` (``orelse`` None: without an ``else``)."""

    cond: Pattern
    then: Pattern
    orelse: Pattern | None = None

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        if node is None or node.type != "if_statement":
            return None
        clause, conseq, alt = _fields(node, "condition", "consequence", "alternative")
        if (alt is None) != (self.orelse is None):
            return None
        value = clause.child_by_field_name("value") if clause is not None else None
        out = self.cond.match(view, value, caps)
        out = self.then.match(view, conseq, out) if out is not None else None
        if out is not None and self.orelse is not None and alt is not None:
            alt_body = alt.named_children[-1] if alt.named_children else None
            out = self.orelse.match(view, alt_body, out)
        return out


@dataclass(frozen=True)
class Barrier(Pattern):
    """A barrier of the whole block, in any spelling the view knows."""

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        return caps if node is not None and view.block_barrier(node) else None


BARRIER = Barrier()


@dataclass(frozen=True)
class For(Pattern):
    """A ``for`` loop of the view over the variable bound to ``var`` (captured as ``loop``)."""

    var: str
    start: Pattern = ANY
    cond: Pattern = ANY
    update: Pattern = ANY
    body: Pattern = ANY

    def match(self, view: KernelView, node: Node | None, caps: Captures) -> Captures | None:
        loop = view.loop_of(node) if node is not None and node.type == "for_statement" else None
        if loop is None or not loop.var or (self.var in caps and caps[self.var] != loop.var):
            return None
        out: Captures | None = {**caps, self.var: loop.var, "loop": loop}
        cond = unparenthesized(loop.node.child_by_field_name("condition"))
        update = loop.node.child_by_field_name("update")
        for p, n in (
            (self.start, loop.start),
            (self.cond, cond),
            (self.update, update),
            (self.body, loop.body),
        ):
            out = p.match(view, n, out) if out is not None else None
        return out


def find(view: KernelView, pattern: Pattern, among: Iterable[Node] | None = None) -> Captures | None:
    """The captures of the first node of ``among`` (by default: the kernel's loops, outermost
    first) that ``pattern`` matches, or None."""
    nodes = among if among is not None else (lp.node for lp in view.loops)
    for n in nodes:
        out = pattern.match(view, n, {})
        if out is not None:
            return out
    return None
