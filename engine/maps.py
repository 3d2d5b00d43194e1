"""Accesses as integer maps: each memory access of a kernel as a quasi-affine map, built with ISL.

Every access ``a[e]`` of the (normalized) kernel becomes, at each concrete problem of the spec
(every verification size and the benchmark size), an :class:`islpy.Map` from the thread's point
``[bz, by, bx, tz, ty, tx, <enclosing loop iterators>]`` to the element it touches, whose domain
holds what limits that point: the launch (``0 <= tx < blockDim.x`` ...), the enclosing loops'
bounds and strides (``start <= k < bound``, ``k = start + step * j``), the enclosing ``if``
conditions and the early ``return``/``continue`` before the access (bounds checks, triangles,
tails).  Index arithmetic is read through the view's scopes (single-assignment locals
substituted, aliases' offsets added, macros and ``constexpr``\\ s folded); at a concrete size
``/`` and ``%`` by constants are ISL's ``floor`` and ``mod``, so ``row = idx / C``, ``col = idx %
C`` and 4-D decompositions by products of dimensions are exact.  What is not quasi-affine there
(a product of two thread-dependent values, a data-dependent index) has no map, with the reason.

Facts (each holds only if it holds at every problem; a pass reads them, never the maps' text):

- :meth:`AccessMaps.permutation`: a copy's write and read are both one-to-one on its domain — the
  output is a permutation of the input elements it reads, whatever the spelling of the indices;
- :meth:`AccessMaps.translation`: a read is the thread's point (an access of reference) moved by
  a fixed offset per tap — stencil taps, and loop taps with constant bounds (``in[(y + j) * W +
  x + i]`` against ``out[y * W + x]``), each tap's offset constant over the threads;
- :meth:`AccessMaps.strides`: how an access's index moves when one domain dimension (``tx``, a
  loop iterator) steps by one; ``contiguous`` along ``threadIdx.x`` is the stride set ``{1}``;
- :meth:`AccessMaps.selects`: a condition inside a tree's loop holds exactly at the threads whose
  ``threadIdx.x`` is a multiple of a fixed factor times the stride (or at every thread that runs
  it), for each of the stride's values — what the test means, however it is spelled;
- :meth:`AccessMaps.reduction_axis`: a loop whose reads move by a fixed stride per iteration and
  whose writes do not move with it — a reduction over that one dimension (its projection).

The module reads the view through :class:`MapsView` (a protocol: this module does not import the
view, the view imports it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

try:
    import islpy as isl
except ImportError:  # a checkout without the wheel: every fact answers why not, the other passes run
    isl = None  # type: ignore[assignment]
import tree_sitter

from base.errors import InputError
from cudasrc.specs import ScalarSpec, evaluate, verify_sizes
from cudasrc.specs import bench_sizes as _bench_sizes

Node = tree_sitter.Node
THREAD = ("bz", "by", "bx", "tz", "ty", "tx")  # the thread's point, outermost first
_POSITION = {"threadIdx": "t", "blockIdx": "b"}
_SIZES = {"blockDim": "block", "gridDim": "grid"}
_CMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "=", "!=": "!="}
_NEG = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
Expr = int | str  # a constant, or ISL affine text over the domain's dimensions


class MapsView(Protocol):
    """What the maps read of a :class:`~engine.view.KernelView`."""

    subject: Any
    body: Node
    loops: tuple[Any, ...]  # view.Loop
    params: dict[str, Any]
    front: Any  # frontend.Context

    @property
    def accesses(self) -> tuple[Any, ...]: ...  # view.Access
    @property
    def aliases(self) -> dict[str, tuple[str, Any]]: ...
    def text(self, node: Node) -> str: ...
    def declaration_of(self, use: Node) -> Any: ...

    declarations: dict[str, tuple[Any, ...]]


@dataclass(frozen=True)
class SizePoint:
    """One concrete size: the values of the scalar parameters, the launch, the label."""

    label: str
    sizes: Mapping[str, int]  # the spec's sizes
    scalars: Mapping[str, int]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]


@dataclass(frozen=True)
class Relation:
    """One access at one problem: ``dims`` (the thread's point and the iterators of its loops,
    outermost first) and its pieces, each the index as ISL text and the domain's constraints (one
    piece, or one per value of the iterators whose steps scale them, ``s >>= 1``, where an index
    divides by one: ``tid % (2 * s)``)."""

    dims: tuple[str, ...]
    pieces: tuple[tuple[str, str], ...]

    def map(self, dims: tuple[str, ...] | None = None) -> isl.Map:
        """The access as a map over ``dims`` (its own by default; extra dimensions unconstrained)."""
        names = ", ".join(dims or self.dims)
        return isl.Map("{ " + "; ".join(f"[{names}] -> [{i}] : {d}" for i, d in self.pieces) + " }")


@dataclass(frozen=True)
class Permutation:
    """``dst``'s write and ``src``'s read are one-to-one on the copy's domain at every problem:
    the output elements written are a permutation of the input elements read."""

    dst: Any
    src: Any


@dataclass(frozen=True)
class Translation:
    """``read`` touches the element of ``center`` moved by a fixed offset per tap: ``taps`` are
    the offsets at each problem (a loop over taps with constant bounds gives several)."""

    read: Any
    center: Any
    loops: tuple[str, ...]  # the loop iterators the taps run over ("" none: a fixed tap)
    taps: tuple[frozenset[int], ...]


@dataclass(frozen=True)
class ReductionAxis:
    """A loop whose reads move by a fixed stride per iteration (per array, at every problem)
    while the writes in force do not move with it: a reduction over that one dimension."""

    loop: Any
    strides: Mapping[str, tuple[int, ...]]  # array -> its stride along the loop, per problem


class Unmapped(InputError):
    """The expression is not quasi-affine at a concrete size (the message says why)."""


# ----------------------------------------------------------------------------------- the lift


class _Lift:
    """Reads expressions of one access as ISL text at one problem."""

    def __init__(
        self,
        maps: AccessMaps,
        problem: SizePoint,
        loop_dims: Mapping[str, Expr],
        moved: Mapping[str, str] | None = None,
    ) -> None:
        self.view = maps.view
        self.constants = maps.constants
        self.problem = problem
        self.loop_dims = loop_dims  # loop variable -> its dimension (the enclosing loops')
        self.moved = moved or {}  # a thread index read as another expression ("ty" -> "(ty + k0)")
        self.stack: set[int] = set()

    def text(self, n: Node) -> str:
        return self.view.text(n)

    def expr(self, n: Node | None) -> Expr:
        if n is None:
            raise Unmapped("a missing expression")
        t = n.type
        if t in ("parenthesized_expression",) and n.named_child_count == 1:
            return self.expr(n.named_children[0])
        if t == "cast_expression":
            return self.expr(n.child_by_field_name("value"))
        if t == "number_literal":
            s = self.text(n).rstrip("uUlL")
            try:
                return int(s, 0)
            except ValueError:
                raise Unmapped(f"`{self.text(n)}` is not an integer") from None
        if t == "field_expression":
            return self._position(n)
        if t == "identifier":
            return self._name(n)
        if t == "unary_expression":
            op = n.child_by_field_name("operator")
            v = self.expr(n.child_by_field_name("argument"))
            o = self.text(op) if op is not None else ""
            if o == "+":
                return v
            if o == "-":
                return -v if isinstance(v, int) else f"-({v})"
            raise Unmapped(f"`{self.text(n)}` is not affine")
        if t == "binary_expression":
            return self._binary(n)
        raise Unmapped(f"`{self.text(n)}` is not affine")

    def _position(self, n: Node) -> Expr:
        arg, fld = n.child_by_field_name("argument"), n.child_by_field_name("field")
        base, axis = (self.text(arg) if arg is not None else ""), (self.text(fld) if fld is not None else "")
        if axis not in ("x", "y", "z"):
            raise Unmapped(f"`{self.text(n)}` is not a position")
        k = "xyz".index(axis)
        if base in _POSITION:
            return self.moved.get(_POSITION[base] + axis, _POSITION[base] + axis)
        if base == "blockDim":
            return self.problem.block[k]
        if base == "gridDim":
            return self.problem.grid[k]
        raise Unmapped(f"`{self.text(n)}` is not a position")

    def _name(self, n: Node) -> Expr:
        name = self.text(n)
        if name in self.loop_dims:
            return self.loop_dims[name]
        local = self.view.declaration_of(n)
        if local is not None:
            if local.reassigned or local.pointer or local.value is None or local.decl.id in self.stack:
                raise Unmapped(f"`{name}` is not a single-assignment integer")
            self.stack.add(local.decl.id)
            try:
                return self.expr(local.value)
            finally:
                self.stack.discard(local.decl.id)
        if name in self.problem.scalars:
            return self.problem.scalars[name]
        if name in self.constants:
            return self.constants[name]
        if name == "warpSize":
            return 32
        raise Unmapped(f"`{name}` has no value at a concrete size")

    def _binary(self, n: Node) -> Expr:
        op = n.child_by_field_name("operator")
        o = self.text(op) if op is not None else ""
        a, b = self.expr(n.child_by_field_name("left")), self.expr(n.child_by_field_name("right"))
        if isinstance(a, int) and isinstance(b, int):
            return _fold(o, a, b, self.text(n))
        if o == "+":
            return f"({a}) + ({b})"
        if o == "-":
            return f"({a}) - ({b})"
        if o == "*" and isinstance(a, int):
            return f"{a} * ({b})"
        if o == "*" and isinstance(b, int):
            return f"{b} * ({a})"
        if isinstance(b, int) and b > 0:
            if o == "/":
                return f"floor(({a}) / {b})"
            if o == "%":
                return f"(({a}) mod {b})"
            if o == ">>" and b < 62:
                return f"floor(({a}) / {2**b})"
            if o == "<<" and b < 62:
                return f"{2**b} * ({a})"
            if o == "&" and b & (b + 1) == 0:
                return f"(({a}) mod {b + 1})"
        raise Unmapped(f"`{self.text(n)}` is not quasi-affine (a product or quotient of two unknowns)")

    def cond(self, n: Node | None, negate: bool = False) -> str:
        """A condition as ISL constraints (``negate``: its negation)."""
        if n is None:
            raise Unmapped("a missing condition")
        t = n.type
        if t == "parenthesized_expression" and n.named_child_count == 1:
            return self.cond(n.named_children[0], negate)
        if t == "unary_expression" and self.text(n.children[0]) == "!":
            return self.cond(n.child_by_field_name("argument"), not negate)
        if t == "identifier":  # a boolean local
            local = self.view.declaration_of(n)
            if local is not None and local.value is not None and not local.reassigned:
                return self.cond(local.value, negate)
        if t == "binary_expression":
            op = n.child_by_field_name("operator")
            o = self.text(op) if op is not None else ""
            left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
            if o in ("&&", "||"):
                joiner = " and " if (o == "&&") != negate else " or "
                return f"(({self.cond(left, negate)}){joiner}({self.cond(right, negate)}))"
            if o in _CMP:
                o = _NEG[o] if negate else o
                a, b = self.expr(left), self.expr(right)
                if o == "!=":
                    return f"(({a}) < ({b}) or ({a}) > ({b}))"
                return f"({a}) {_CMP[o]} ({b})"
        raise Unmapped(f"`{self.text(n)}` is not an affine condition")


def _fold(o: str, a: int, b: int, text: str) -> int:
    if o == "+":
        return a + b
    if o == "-":
        return a - b
    if o == "*":
        return a * b
    if o in ("/", "%") and b != 0:
        q = (
            int(a / b)
            if abs(a) < 2**52 and abs(b) < 2**52
            else (abs(a) // abs(b)) * (1 if (a < 0) == (b < 0) else -1)
        )
        return q if o == "/" else a - q * b
    if o == "<<" and 0 <= b < 62:
        return a << b
    if o == ">>" and 0 <= b < 62:
        return a >> b
    if o == "&":
        return a & b
    raise Unmapped(f"`{text}` is not an integer constant")


# ----------------------------------------------------------------------------------- the maps


class AccessMaps:
    """The access maps of one view at every concrete problem of its spec (see the module
    docstring); ``relations(access)`` answers one :class:`Relation` per problem or the reason."""

    def __init__(self, view: MapsView) -> None:
        self.view = view
        front = view.front
        self.constants: dict[str, int] = {k: v for k, v in front.constants.items() if k not in view.params}

    @cached_property
    def problems(self) -> tuple[SizePoint, ...] | str:
        """The spec's verification problems and its benchmark problem, at the launch in force."""
        if isl is None:
            return "islpy is not installed: no access maps"
        subject = self.view.subject
        spec = subject.spec
        try:
            all_sizes = (*verify_sizes(spec), _bench_sizes(spec))
        except ValueError as exc:
            return f"the spec's sizes do not resolve: {exc}"
        out = []
        for sizes in dict.fromkeys(tuple(sorted(s.items())) for s in all_sizes):
            env: dict[str, Any] = dict(sizes)
            try:
                block = tuple(int(evaluate(d, env)) for d in subject.block)
                bx, by, bz = (*block, 1, 1, 1)[:3]
                env.update(block=bx, block_x=bx, block_y=by, block_z=bz)
                grid = tuple(int(evaluate(d, env)) for d in subject.grid)
                scalars = {}
                for a in spec.args:
                    if isinstance(a, ScalarSpec):
                        v = evaluate(a.value, env)
                        if isinstance(v, int) or (isinstance(v, float) and v.is_integer()):
                            scalars[a.name] = int(v)
            except (ValueError, TypeError) as exc:
                return f"the launch does not resolve at {dict(sizes)}: {exc}"
            gx, gy, gz = (*grid, 1, 1, 1)[:3]
            label = ", ".join(f"{k}={v}" for k, v in sizes)
            out.append(SizePoint(label, dict(sizes), scalars, (gx, gy, gz), (bx, by, bz)))
        return tuple(out)

    def _loops_of(self, node: Node) -> list[Any]:
        """The view's loops enclosing ``node``, outermost first."""
        by_node = {lp.node.id: lp for lp in self.view.loops}
        out = []
        up = node.parent
        while up is not None:
            if up.id in by_node and _inside_body(node, by_node[up.id]):
                out.append(by_node[up.id])
            up = up.parent
        return out[::-1]

    def dims_of(self, node: Node) -> tuple[str, ...]:
        return (*THREAD, *(self._dim(lp) for lp in self._loops_of(node)))

    def _dim(self, loop: Any) -> str:
        return f"k{self.view.loops.index(loop)}"

    def relations(self, access: Any) -> tuple[Relation, ...] | str:
        """One relation per problem, or why the access has no map."""
        return self._relations(access.node, access)

    def point(self, node: Node) -> tuple[Relation, ...] | str:
        """The domain of the statement holding ``node`` (its index: 0), per problem."""
        return self._relations(node, None)

    @cached_property
    def _cache(self) -> dict[int, tuple[Relation, ...] | str]:
        return {}

    def _relations(self, node: Node, access: Any) -> tuple[Relation, ...] | str:
        key = node.id * 2 + (access is not None)
        if key not in self._cache:
            self._cache[key] = self._build(node, access)
        return self._cache[key]

    def _build(self, node: Node, access: Any) -> tuple[Relation, ...] | str:
        problems = self.problems
        if isinstance(problems, str):
            return problems
        loops = self._loops_of(node)
        dims = (*THREAD, *(self._dim(lp) for lp in loops))
        out = []
        for problem in problems:
            try:
                out.append(Relation(dims, self._pieces(problem, node, access, loops)))
            except Unmapped as exc:
                return str(exc)
            except RecursionError:
                return "the expression nests too deeply"
        try:  # the text parses (ISL's own limits, e.g. coefficients beyond its integers)
            out[-1].map()
        except isl.Error as exc:
            return f"ISL refused the map: {exc}"
        return tuple(out)

    def _pieces(
        self, problem: SizePoint, node: Node, access: Any, loops: list[Any]
    ) -> tuple[tuple[str, str], ...]:
        names: dict[str, Expr] = {lp.var: self._dim(lp) for lp in loops if lp.var}
        try:
            return (self._piece(_Lift(self, problem, names), node, access, loops),)
        except Unmapped as first:
            scaled = []  # loops whose values are few: pin each value as a constant
            for lp in loops:
                plain = _Lift(self, problem, names)
                try:
                    self._step(plain, lp)
                except Unmapped:
                    try:
                        values = self._values(plain, lp, plain.expr(lp.start), plain.expr(lp.bound))
                    except Unmapped:
                        values = None
                    if values is not None:
                        scaled.append((lp, values))
            if not scaled or math.prod(len(v) for _, v in scaled) > 256:
                raise first from None
            pieces = []
            for combo in itertools.product(*(v for _, v in scaled)):
                pinned = dict(names)
                pinned.update({lp.var: value for (lp, _), value in zip(scaled, combo, strict=True)})
                index, domain = self._piece(_Lift(self, problem, pinned), node, access, loops)
                fixed = " and ".join(
                    f"{self._dim(lp)} = {v}" for (lp, _), v in zip(scaled, combo, strict=True)
                )
                pieces.append((index, f"{domain} and {fixed}"))
            return tuple(pieces)

    def _piece(self, lift: _Lift, node: Node, access: Any, loops: list[Any]) -> tuple[str, str]:
        index = self._index(lift, access) if access is not None else "0"
        return index, " and ".join(self._domain(lift, node, loops))

    def _index(self, lift: _Lift, access: Any) -> str:
        sub = access.node
        idx = sub.child_by_field_name("indices")
        if idx is None or idx.named_child_count != 1:
            raise Unmapped("not a one-dimensional subscript")
        index = lift.expr(idx.named_children[0])
        if access.via in self.view.aliases:  # ``const float* x = in + r * cols``: the offset added
            index = f"({index}) + ({self._alias_offset(lift, access.via)})"
        return str(index)

    def _alias_offset(self, lift: _Lift, name: str) -> Expr:
        chain: list[Node] = []
        seen = set()
        while name in self.view.aliases and name not in seen:
            seen.add(name)
            local = next(iter(self.view.declarations.get(name, ())), None)
            value = _bare(local.value) if local is not None else None
            if value is None:
                raise Unmapped(f"the alias `{name}` has no value")
            if value.type == "pointer_expression":  # &param[offset]
                sub = _bare(value.child_by_field_name("argument"))
                idx = sub.child_by_field_name("indices") if sub is not None else None
                if sub is None or idx is None or idx.named_child_count != 1:
                    raise Unmapped(f"the alias `{name}` is not `&a[offset]`")
                chain.append(idx.named_children[0])
                base = sub.child_by_field_name("argument")
            else:
                terms = _sum_terms(value)
                arrays = [t for t in terms if t.type == "identifier" and self.view.text(t) in self._arrays]
                if len(arrays) != 1:
                    raise Unmapped(f"the alias `{name}` is not `a + offset`")
                chain += [t for t in terms if t != arrays[0]]
                base = arrays[0]
            name = self.view.text(base) if base is not None else ""
        total: Expr = 0
        for t in chain:
            v = lift.expr(t)
            total = total + v if isinstance(total, int) and isinstance(v, int) else f"({total}) + ({v})"
        return total

    @cached_property
    def _arrays(self) -> frozenset[str]:
        return frozenset({n for n, p in self.view.params.items() if p.pointer >= 1} | set(self.view.aliases))

    def _domain(self, lift: _Lift, node: Node, loops: list[Any]) -> Iterator[str]:
        p = lift.problem
        for axis, k in zip("xyz", range(3), strict=True):
            yield f"0 <= t{axis} < {p.block[k]}"
            yield f"0 <= b{axis} < {p.grid[k]}"
        for lp in loops:
            yield from self._loop(lift, lp)
        yield from self._guards(lift, node)

    def _loop(self, lift: _Lift, lp: Any) -> Iterator[str]:
        d = self._dim(lp)
        if not lp.var or lp.start is None or lp.bound is None or lp.op not in ("<", "<=", ">", ">=", "!="):
            raise Unmapped(f"the loop `{lift.text(lp.node).splitlines()[0]}` has no affine bounds")
        start, bound = lift.expr(lp.start), lift.expr(lp.bound)
        try:
            step = self._step(lift, lp)
        except Unmapped:
            values = self._values(lift, lp, start, bound)
            if values is None:
                raise
            yield "(" + (" or ".join(f"{d} = {v}" for v in values) or "1 = 0") + ")"
            return
        op = "<" if lp.op == "!=" and step > 0 else ">" if lp.op == "!=" else lp.op
        if (op in ("<", "<=")) != (step > 0):
            raise Unmapped("the loop's step runs away from its bound")
        yield f"{d} {op} ({bound})"
        yield f"{d} {'>=' if step > 0 else '<='} ({start})"
        if abs(step) != 1:
            yield f"exists (e{d}: {d} = ({start}) + {step} * e{d})"

    def _values(self, lift: _Lift, lp: Any, start: Expr, bound: Expr) -> list[int] | None:
        """The iterator's values, when its start and bound are constants at this problem and its
        update scales it (``s >>= 1``, ``s /= 2``, ``s *= 2``, ``s = s / 2`` ...): a tree's strides."""
        update = lp.node.child_by_field_name("update")
        if not isinstance(start, int) or not isinstance(bound, int) or update is None:
            return None
        if update.type != "assignment_expression":
            return None
        o, right = lift.text(update.children[1]), update.child_by_field_name("right")
        if o == "=" and right is not None and right.type == "binary_expression":
            a = right.child_by_field_name("left")
            if a is None or lift.text(a) != lp.var:
                return None
            o, right = lift.text(right.children[1]) + "=", right.child_by_field_name("right")
        k = lift.expr(right)
        if not isinstance(k, int) or o not in (">>=", "<<=", "*=", "/="):
            return None
        holds = {"<": int.__lt__, "<=": int.__le__, ">": int.__gt__, ">=": int.__ge__, "!=": int.__ne__}[
            lp.op
        ]
        out: list[int] = []
        v = start
        while holds(v, bound) and len(out) < 64:
            out.append(v)
            nxt = _fold(o[:-1], v, k, lift.text(update))
            if nxt == v:
                return None
            v = nxt
        return out if not holds(v, bound) else None

    def _step(self, lift: _Lift, lp: Any) -> int:
        update = lp.node.child_by_field_name("update")
        var = lp.var
        if update is not None and update.type == "update_expression":
            return 1 if "++" in lift.text(update) else -1
        if update is not None and update.type == "assignment_expression":
            o = lift.text(update.children[1])
            right = update.child_by_field_name("right")
            if o in ("+=", "-="):
                v = lift.expr(right)
                if isinstance(v, int) and v != 0:
                    return v if o == "+=" else -v
            if o == "=" and right is not None and right.type == "binary_expression":
                a, b = right.child_by_field_name("left"), right.child_by_field_name("right")
                if a is not None and lift.text(a) == var and lift.text(right.children[1]) == "+":
                    v = lift.expr(b)
                    if isinstance(v, int) and v != 0:
                        return v
        raise Unmapped(f"the loop over `{var}` has no constant step")

    def _guards(self, lift: _Lift, node: Node) -> Iterator[str]:
        """The conditions under which ``node`` runs: enclosing ``if``s and ``?:``, and ``if (c)
        return;`` or ``continue`` before it in an enclosing block (as far as the kernel's body).
        A condition that is not affine (a test of data, ``x[i] > 0``) is left out: the domain is
        then larger than the truth, and every fact of this module holds on any part of a domain
        where it holds."""
        child, up = node, node.parent
        body = self.view.body
        while up is not None and child != body:
            tests: list[tuple[Node | None, bool]] = []
            if up.type in ("if_statement", "conditional_expression"):
                cond = up.child_by_field_name("condition")
                if up.type == "if_statement" and cond is not None:
                    cond = cond.child_by_field_name("value")
                if child == up.child_by_field_name("consequence"):
                    tests.append((cond, False))
                elif child == up.child_by_field_name("alternative"):
                    tests.append((cond, True))
            elif up.type == "compound_statement":
                for st in up.named_children:
                    if st.start_byte >= child.start_byte:
                        break
                    if st.type == "if_statement" and _leaves(st):
                        clause = st.child_by_field_name("condition")
                        tests.append(
                            (clause.child_by_field_name("value") if clause is not None else None, True)
                        )
            for cond, negate in tests:
                try:
                    yield lift.cond(cond, negate)
                except Unmapped:
                    continue
            child, up = up, up.parent

    def evaluate(self, node: Node) -> tuple[int, ...] | str:
        """The value of an expression the same for every thread (sizes, constants) at each problem."""
        problems = self.problems
        if isinstance(problems, str):
            return problems
        out = []
        for problem in problems:
            try:
                v = _Lift(self, problem, {}).expr(node)
            except Unmapped as exc:
                return str(exc)
            if not isinstance(v, int):
                return f"`{self.view.text(node)}` differs between threads"
            out.append(v)
        return tuple(out)

    def span(self, node: Node, expr: Node) -> tuple[tuple[int, int], ...] | str:
        """The least and greatest value of ``expr`` where ``node`` runs, at each problem."""
        problems = self.problems
        if isinstance(problems, str):
            return problems
        loops = self._loops_of(node)
        dims = ", ".join((*THREAD, *(self._dim(lp) for lp in loops)))
        out = []
        for problem in problems:
            lift = _Lift(self, problem, {lp.var: self._dim(lp) for lp in loops if lp.var})
            try:
                value, domain = lift.expr(expr), " and ".join(self._domain(lift, node, loops))
            except Unmapped as exc:
                return str(exc)
            rng = isl.Map(f"{{ [{dims}] -> [{value}] : {domain} }}").range()
            if rng.is_empty() or not rng.is_bounded():
                return f"`{self.view.text(expr)}` takes no bounded range of values"
            out.append((rng.dim_min_val(0).to_python(), rng.dim_max_val(0).to_python()))
        return tuple(out)

    def once_per_thread(self, loop: Any) -> bool:
        """Whether every thread runs ``loop``'s body at most once, at every problem (a grid-stride
        loop on a grid that covers its range)."""
        problems = self.problems
        if isinstance(problems, str):
            return False
        loops = list(dict.fromkeys([*self._loops_of(loop.node), loop]))
        d = self._dim(loop)
        outer = [self._dim(lp) for lp in loops if lp is not loop]
        for problem in problems:
            lift = _Lift(self, problem, {lp.var: self._dim(lp) for lp in loops if lp.var})
            try:
                domain = " and ".join(self._domain(lift, loop.body, loops))
            except Unmapped:
                return False
            m = isl.Map(f"{{ [{', '.join((*THREAD, *outer))}] -> [{d}] : {domain} }}")
            if not m.is_single_valued():
                return False
        return True

    # ------------------------------------------------------------------------------- facts

    def permutation(self, dst: Any, src: Any) -> Permutation | str:
        """Whether the copy ``dst[...] = src[...]`` writes each element once and reads each once."""
        w, r = self.relations(dst), self.relations(src)
        if isinstance(w, str) or isinstance(r, str):
            return w if isinstance(w, str) else str(r)
        for wp, rp in zip(w, r, strict=True):
            dims = _union(wp.dims, rp.dims)
            wm, rm = wp.map(dims), rp.map(dims)
            if not wm.is_injective():
                return "two threads write the same output element"
            if not rm.is_injective():
                return "an input element is read twice"
        return Permutation(dst, src)

    def translation(self, read: Any, center: Any) -> Translation | str:
        """Whether ``read`` is ``center``'s element moved by a fixed offset per tap (the taps: the
        iterators of ``read``'s loops that ``center`` is outside)."""
        rr, cc = self.relations(read), self.relations(center)
        if isinstance(rr, str) or isinstance(cc, str):
            return rr if isinstance(rr, str) else str(cc)
        taps = []
        loops: tuple[str, ...] = ()
        for rp, cp in zip(rr, cc, strict=True):
            dims = _union(rp.dims, cp.dims)
            loops = tuple(d for d in rp.dims if d not in cp.dims)
            diff = rp.map(dims).sum(cp.map(dims).neg())  # point -> read - center
            by_tap = _keep_dims(diff, dims, loops)  # the thread's point projected out
            if not by_tap.is_single_valued():
                return "the offset of the read from the thread's element depends on the thread"
            offsets = by_tap.range()
            if offsets.is_empty():
                return "the read and the thread's element are never touched together"
            if not offsets.is_bounded():
                return "the taps are unbounded"
            taps.append(frozenset(_points(offsets)))
        return Translation(read, center, loops, tuple(taps))

    def deltas_along(self, base: Any, other: Any, steps: tuple[int, ...]) -> tuple[frozenset[int], ...] | str:
        """How ``other``'s index moves when ``base``'s index moves by ``steps[k]`` (at problem
        ``k``), over the points where both run: the other side of a copy seen along a step of
        the contiguous side (at most 64 distinct moves reported)."""
        bb, oo = self.relations(base), self.relations(other)
        if isinstance(bb, str) or isinstance(oo, str):
            return bb if isinstance(bb, str) else str(oo)
        out = []
        for bp, op, step in zip(bb, oo, steps, strict=True):
            dims = _union(bp.dims, op.dims)
            along = bp.map(dims).reverse().apply_range(op.map(dims))  # base index -> other index
            shift = isl.Map(f"{{ [i] -> [i + {step}] }}")
            moved = shift.apply_range(along).sum(along.neg()).range()
            if moved.is_empty() or not moved.is_bounded():
                return "the other side does not move boundedly along the step"
            out.append(frozenset(_points(moved, 64)))
        return tuple(out)

    def loop_step(self, loop: Any) -> int | None:
        """``loop``'s constant step, the same at every problem (None otherwise)."""
        problems = self.problems
        if isinstance(problems, str):
            return None
        try:
            steps = {self._step(_Lift(self, p, {}), loop) for p in problems}
        except Unmapped:
            return None
        return steps.pop() if len(steps) == 1 else None

    def through(self, access: Any, loop: Any, axis: str = "y") -> bool:
        """Whether ``access`` depends on ``threadIdx.<axis>`` and on ``loop``'s iterator only
        through their sum (``y + j`` with ``y = blockIdx.y * T + threadIdx.y``): the access at
        every point equals the access with the thread index moved by the iterator and the
        iterator at 0, at every problem."""
        rel = self.relations(access)
        problems = self.problems
        if isinstance(rel, str) or isinstance(problems, str) or not loop.var:
            return False
        d = self._dim(loop)
        loops = self._loops_of(access.node)
        if loop not in loops:
            return False
        for problem, rp in zip(problems, rel, strict=True):
            if len(rp.pieces) != 1:
                return False
            names: dict[str, Expr] = {lp.var: self._dim(lp) for lp in loops if lp.var}
            names[loop.var] = 0
            lift = _Lift(self, problem, names, {f"t{axis}": f"(t{axis} + {d})"})
            try:
                index = self._index(lift, access)
            except Unmapped:
                return False
            moved = Relation(rp.dims, tuple((index, dom) for _, dom in rp.pieces))
            if not rp.map().is_equal(moved.map()):
                return False
        return True

    def selects(self, node: Node, cond: Node, loop: Any, every: int | None) -> bool | str:
        """Whether ``cond`` holds, among the threads that run ``node``, exactly at those whose
        ``threadIdx.x`` is a multiple of ``every * s`` (``every`` None: at all of them), at every
        problem and every value ``s`` of ``loop``'s iterator (a tree's strides, constants at each
        problem: ``idx % (2 * s) == 0`` over the global index is ``tid % (2 * s) == 0`` when the
        block is a multiple of ``2 * s``); the reason where not."""
        problems = self.problems
        if isinstance(problems, str):
            return problems
        loops = self._loops_of(node)
        if loop not in loops or not loop.var:
            return f"`{self.view.text(cond)}` is not inside the loop"
        others = [lp for lp in loops if lp is not loop]
        dims = ", ".join((*THREAD, *(self._dim(lp) for lp in others)))
        for problem in problems:
            names: dict[str, Expr] = {lp.var: self._dim(lp) for lp in others if lp.var}
            try:
                outer = _Lift(self, problem, names)
                values = self._values(outer, loop, outer.expr(loop.start), outer.expr(loop.bound))
                if values is None:
                    return f"the loop over `{loop.var}` takes no constant values at {problem.label}"
                for s in values:
                    lift = _Lift(self, problem, {**names, loop.var: s})
                    runs = isl.Set(f"{{ [{dims}] : {' and '.join(self._domain(lift, node, others))} }}")
                    held = runs.intersect(isl.Set(f"{{ [{dims}] : {lift.cond(cond)} }}"))
                    wanted = runs
                    if every is not None:
                        wanted = runs.intersect(isl.Set(f"{{ [{dims}] : tx mod {every * s} = 0 }}"))
                    if not held.is_equal(wanted):
                        return f"`{self.view.text(cond)}` selects other threads at {loop.var} = {s}, {problem.label}"
            except Unmapped as exc:
                return str(exc)
        return True

    def strides(self, access: Any, dim: str, warp: bool = False) -> tuple[frozenset[int], ...] | str:
        """How the index of ``access`` moves when ``dim`` steps by one (the loop's step for a
        loop iterator), at each problem; ``warp``: only between lanes of one warp (``tx``)."""
        rel = self.relations(access)
        if isinstance(rel, str):
            return rel
        problems = self.problems
        assert not isinstance(problems, str)  # the relations exist
        out = []
        for problem, rp in zip(problems, rel, strict=True):
            if dim not in rp.dims:
                out.append(frozenset({0}))
                continue
            step = 1
            if dim.startswith("k"):
                try:
                    step = abs(self._step(_Lift(self, problem, {}), self.view.loops[int(dim[1:])]))
                except Unmapped as exc:
                    return str(exc)
            names = ", ".join(rp.dims)
            moved = ", ".join(f"{d} + {step}" if d == dim else d for d in rp.dims)
            lanes = " : tx mod 32 < 31" if warp and dim == "tx" else ""
            shift = isl.Map(f"{{ [{names}] -> [{moved}]{lanes} }}")
            m = rp.map()
            delta = shift.apply_range(m).sum(m.neg())
            rng = delta.range()
            if rng.is_empty():
                out.append(frozenset())
                continue
            if not rng.is_bounded():
                return f"the index moves without bound along {dim}"
            out.append(frozenset(_points(rng)))
        return tuple(out)

    def contiguous(self, access: Any, warp: bool = False) -> bool:
        """Neighbouring threads along ``threadIdx.x`` touch neighbouring elements, at every problem
        (``warp``: the lanes of each warp do — the warp's access is one coalesced run)."""
        s = self.strides(access, "tx", warp)
        return not isinstance(s, str) and all(x <= {1} and x for x in s)

    def reduction_axis(self, loop: Any) -> ReductionAxis | str:
        """Whether ``loop`` reduces over one dimension: every read inside it moves by a fixed
        stride per iteration, and no write inside it moves with it."""
        d = self._dim(loop)
        strides: dict[str, tuple[int, ...]] = {}
        for a in self.view.accesses:
            if not _inside_body(a.node, loop):
                continue
            s = self.strides(a, d)
            if isinstance(s, str):
                return s
            if a.written:
                if any(x - {0} for x in s):
                    return f"the write `{self.view.text(a.node)}` moves with the loop"
                continue
            if not all(len(x) == 1 for x in s):
                return f"`{self.view.text(a.node)}` moves by no fixed stride"
            per = tuple(next(iter(x)) for x in s)
            if strides.setdefault(a.array, per) != per:
                return f"`{a.array}` is read at two strides"
        return ReductionAxis(loop, strides)


# ----------------------------------------------------------------------------------- helpers


def _bare(n: Node | None) -> Node | None:
    while n is not None and n.type in ("parenthesized_expression", "cast_expression"):
        n = n.child_by_field_name("value") if n.type == "cast_expression" else n.named_children[0]
    return n


def _sum_terms(n: Node) -> list[Node]:
    n = _bare(n) or n
    if n.type == "binary_expression" and n.children[1].type == "+":
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is not None and right is not None:
            return _sum_terms(left) + _sum_terms(right)
    return [n]


def _inside_body(node: Node, loop: Any) -> bool:
    body = loop.body
    return body.start_byte <= node.start_byte and node.end_byte <= body.end_byte


def _leaves(s: Node) -> bool:
    """``if (c) return;`` / ``if (c) continue;`` (or the same in braces), no ``else``."""
    conseq = s.child_by_field_name("consequence")
    if conseq is None or s.child_by_field_name("alternative") is not None:
        return False
    body = (
        [c for c in conseq.named_children if c.type != "comment"]
        if conseq.type == "compound_statement"
        else [conseq]
    )
    return (
        len(body) == 1
        and body[0].type in ("return_statement", "continue_statement")
        and body[0].named_child_count == 0
    )


def _union(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return (*a, *(d for d in b if d not in a))


def _keep_dims(m: isl.Map, dims: tuple[str, ...], keep: tuple[str, ...]) -> isl.Map:
    """``m`` with its input dimensions other than ``keep`` projected out."""
    for k in range(len(dims) - 1, -1, -1):
        if dims[k] not in keep:
            m = m.project_out(isl.dim_type.in_, k, 1)
    return m


def _points(s: isl.Set, limit: int = 4096) -> list[int]:
    """The integers of a bounded one-dimensional set (at most ``limit``)."""
    out: list[int] = []

    def take(p: isl.Point) -> None:
        if len(out) < limit:
            out.append(p.get_coordinate_val(isl.dim_type.set, 0).to_python())

    s.foreach_point(take)
    return out
