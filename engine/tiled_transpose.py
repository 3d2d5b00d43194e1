"""Tiled transpose: ``out[c * H + r] = in[r * W + c]``, one element per thread, becomes a padded
shared-memory tile, so that both the reads and the writes are coalesced.

Matches (on the :class:`~engine.view.KernelView`) a body whose only memory access is
that one copy, with the thread's column ``c`` and row ``r`` held in locals that are either the 2-D
global indices (``blockIdx.x * blockDim.x + threadIdx.x`` and its ``y`` twin, in any form: through
other locals, casts, either operand order) or a 1-D global index split by ``% W`` and ``/ W``; the
indices are compared in canonical form (``(size_t)r * W + c``, ``c + W * r`` ...), ``W`` and ``H``
scalar parameters.  The guard is ``if (c < W && r < H) store;`` or
``if (c >= W || r >= H) return; store;`` (either operand order; a split index may instead be
guarded as a whole, ``i < W * H``).

Rewrite (params: ``(tile, rows)``): blocks of ``tile`` x ``rows`` threads on a 2-D grid of tiles
(``cdiv(W, tile), cdiv(H, tile)``); each thread loads ``tile / rows`` elements of a tile into
``__shared__ T tile[tile][tile + 1]`` (the padding avoids bank conflicts), synchronises, and writes
them transposed; edges are guarded for sizes that are not tile multiples; index arithmetic is done in
``size_t`` when the original's was.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from cudasrc.launch import LaunchChange
from cudasrc.specs import ScalarSpec
from engine import NotApplicable, Outcome, _inside
from engine.passes import PAD, Emitter, Match, Pass
from engine.view import KernelView, Poly, global_index, statements, unparenthesized

Node = tree_sitter.Node
Bound = tuple[tuple[tuple[tuple[str, ...], int], ...], ...]  # ``lhs < rhs``, both polynomials sorted


@dataclass(frozen=True)
class Transposed(Match):
    col: str  # the thread's column and row as written
    row: str
    width: str  # W: the columns of ``src`` (scalar parameters)
    height: str  # H: its rows, the columns of ``dst``
    src: str
    dst: str
    wide: bool  # the original computed its indices in size_t


def _bound(lhs: Poly, rhs: Poly) -> Bound:
    return tuple(sorted(lhs.items())), tuple(sorted(rhs.items()))


def _indices(view: KernelView) -> tuple[str, str, str] | NotApplicable:
    """(c, r, W of a 1-D split or "") for the locals holding the thread's column and row."""
    gx = global_index("x")
    kinds: dict[str, str] = {}  # "x"/"y" (2-D) or "%W"/"/W" (1-D split) -> local
    for name, loc in view.locals.items():
        v = unparenthesized(loc.value)
        while v is not None and v.type == "cast_expression":
            v = unparenthesized(v.child_by_field_name("value"))
        if v is None or loc.reassigned or loc.pointer:
            continue
        p = view.poly(v)
        if p in (gx, global_index("y")):
            kinds["x" if p == gx else "y"] = name
        elif v.type == "binary_expression" and view.text(v.children[1]) in ("/", "%"):
            left, right = v.child_by_field_name("left"), v.child_by_field_name("right")
            if (
                left is not None
                and right is not None
                and view.poly(left) == gx
                and right.type == "identifier"
            ):
                kinds[view.text(v.children[1]) + view.text(right)] = name
    if "x" in kinds and "y" in kinds:
        return kinds["x"], kinds["y"], ""
    widths = {k[1:] for k in kinds if k[0] in "/%"}
    w = next((w for w in sorted(widths) if f"/{w}" in kinds and f"%{w}" in kinds), None)
    if w is None:
        return NotApplicable("no 2-D index pair (or 1-D index split by `/` and `%`)")
    return kinds[f"%{w}"], kinds[f"/{w}"], w


class TiledTranspose(Pass[Transposed]):
    name = "TiledTranspose"
    space = ((32, 8), (32, 16), (64, 16))

    def match(self, view: KernelView) -> Transposed | NotApplicable:
        found = _indices(view)
        if isinstance(found, NotApplicable):
            return found
        c, r, split = found
        writes = [a for a in view.accesses if a.written]
        reads = [a for a in view.accesses if not a.written]
        if len(writes) != 1 or len(reads) != 1 or view.loops or view.shared or view.barriers or view.atomics:
            return NotApplicable("the body is not one `out[...] = in[...];` without loops")
        store, load = writes[0], reads[0]
        stmt = store.node.parent.parent if store.node.parent is not None else None
        if stmt is None or stmt.type != "expression_statement" or load.node.parent != store.node.parent:
            return NotApplicable("the guarded statement is not `out[...] = in[...];`")
        free = frozenset({c, r})
        expand = view.expander(free)
        pin = expand.poly(view._index_node(load.node) or load.node)
        pout = expand.poly(view._index_node(store.node) or store.node)

        def width(p: Poly | None, inner: str, outer: str) -> str:
            """W when ``p`` is ``outer * W + inner`` with W a scalar parameter."""
            if p is None or p.get((inner,)) != 1 or len(p) != 2:
                return ""
            (mono,) = [m for m in p if m != (inner,)]
            rest = [a for a in mono if a != outer]
            ok = p[mono] == 1 and len(mono) == 2 and outer in mono and len(rest) == 1
            return rest[0] if ok and rest[0] in view.params and view.params[rest[0]].pointer == 0 else ""

        w, h = width(pin, c, r), width(pout, r, c)
        if not w or not h or (split and split != w):
            return NotApplicable("the indices are not a transpose (in[y * W + x] -> out[x * H + y])")
        found_bounds = self._guard(view, stmt, free)
        if isinstance(found_bounds, NotApplicable):
            return found_bounds
        per_index = {_bound({(c,): 1}, {(w,): 1}), _bound({(r,): 1}, {(h,): 1})}
        whole = {_bound(global_index("x"), {tuple(sorted((w, h))): 1})}  # a split index, guarded as a whole
        if found_bounds != per_index and not (split and found_bounds == whole):
            return NotApplicable("the guard is not `x < W && y < H`")
        return Transposed(view, c, r, w, h, load.array, store.array, expand.wide)

    @staticmethod
    def _guard(view: KernelView, stmt: Node, free: frozenset[str]) -> set[Bound] | NotApplicable:
        """The bounds ``lhs < rhs`` that hold at the store ``stmt``: the terms of
        ``if (c < W && r < H) store;`` or the negated terms of ``if (c >= W || r >= H) return;``."""
        guards = [s for s in statements(view.body) if s.type == "if_statement"]
        if len(guards) != 1 or guards[0].child_by_field_name("alternative") is not None:
            return NotApplicable("the store is not under one `if` bounds check")
        guard = guards[0]
        clause, conseq = guard.child_by_field_name("condition"), guard.child_by_field_name("consequence")
        cond = unparenthesized(clause.child_by_field_name("value") if clause is not None else None)
        leaves = conseq is not None and [(x.type, x.named_child_count) for x in statements(conseq)] == [
            ("return_statement", 0)
        ]
        # each operator: whether its sides are swapped to read `lhs < rhs`
        if leaves:
            if stmt.parent != view.body or stmt.start_byte < guard.end_byte:
                return NotApplicable("the store does not follow the early return")
            joiner, ops = "||", {">=": False, "<=": True}
        else:
            if conseq is None or not _inside(stmt, conseq):
                return NotApplicable("the store is not under the bounds check")
            joiner, ops = "&&", {"<": False, ">": True}
        found: set[Bound] = set()
        terms = [cond]
        while terms:
            t = unparenthesized(terms.pop())
            op = view.text(t.children[1]) if t is not None and t.type == "binary_expression" else ""
            if t is not None and op == joiner:
                terms += [t.child_by_field_name("left"), t.child_by_field_name("right")]
            elif t is not None and op in ops:
                a, b = view.poly(t.children[0], free), view.poly(t.children[2], free)
                if a is None or b is None:
                    return NotApplicable(f"`{view.text(t)}` is not a bound")
                found.add(_bound(b, a) if ops[op] else _bound(a, b))
            else:
                return NotApplicable("the guard is not a bounds check on both indices")
        return found

    def rewrite(self, match: Transposed, params: Hashable) -> Outcome:
        assert isinstance(params, tuple)
        t, r = params
        view = match.view
        subject = view.subject
        scalars = {a.name: a.value for a in subject.spec.args if isinstance(a, ScalarSpec)}
        if match.src not in view.params or match.width not in scalars or match.height not in scalars:
            return NotApplicable("the width and height are not scalar parameters of the spec")
        elem = view.element_type(match.src)
        e = Emitter(view)
        tile, j = e.fresh("tile"), e.fresh("j")
        x, y, w, h = match.col, match.row, match.width, match.height
        wide = "(size_t)" if match.wide else ""
        body = [
            f"// cuda-agent: {t}x{t} shared-memory tile, {t}x{r} threads per block",
            f"__shared__ {elem} {tile}[{t}][{t + 1}];",
            f"int {x} = blockIdx.x * {t} + threadIdx.x;",
            f"int {y} = blockIdx.y * {t} + threadIdx.y;",
            "#pragma unroll",
            f"for (int {j} = 0; {j} < {t}; {j} += {r})",
            f"{PAD}if ({x} < {w} && {y} + {j} < {h}) "
            f"{tile}[threadIdx.y + {j}][threadIdx.x] = {match.src}[{wide}({y} + {j}) * {w} + {x}];",
            "__syncthreads();",
            f"{x} = blockIdx.y * {t} + threadIdx.x;",
            f"{y} = blockIdx.x * {t} + threadIdx.y;",
            "#pragma unroll",
            f"for (int {j} = 0; {j} < {t}; {j} += {r})",
            f"{PAD}if ({x} < {h} && {y} + {j} < {w}) "
            f"{match.dst}[{wide}({y} + {j}) * {h} + {x}] = {tile}[threadIdx.x][threadIdx.y + {j}];",
        ]
        e.replace(view.body, "{\n" + "".join(f"{PAD}{line}\n" for line in body) + "}")
        grid = f"(cdiv({scalars[w]}, {t}), cdiv({scalars[h]}, {t}))"
        return e.rewrite(
            f"shared-memory tiled transpose ({t}x{t})", LaunchChange(grid=grid, block=f"({t}, {r})")
        )
