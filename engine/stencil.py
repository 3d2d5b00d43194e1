"""Stencil tile: a thread-per-output stencil or convolution reads its input through a shared tile
with its halo, loaded once per block, instead of every tap from global memory.

Matches (on the :class:`~engine.view.KernelView`) a kernel without shared memory,
barriers, atomics or shuffles whose reads of one input array ``in`` (a pointer parameter it never
writes) are all *taps* ``in[row * W + col]`` where, in canonical form,

- ``row`` is the 2-D thread row ``blockIdx.y * blockDim.y + threadIdx.y`` plus an offset and
  ``col`` the thread column (``x`` twin) plus an offset, each offset the same for every thread of
  the block (filter loop variables, constants, macros, uniform locals: ``in[(y + i - R) * w + x + j - R]``
  through any locals, casts or operand order), ``W`` a scalar parameter (a 1-D stencil,
  ``in[x + j - R]``, has no row);
- each tap is guarded — enclosing ``if`` conditions or ``?:`` conjunctions — by bounds that keep
  it inside the image, ``0 <= row < H`` and ``0 <= col < W`` (any comparison spelling:
  ``yy >= 0``, ``0 <= yy``, ``yy > -1``, ``yy < h``, ``h > yy`` ...), ``H`` uniform.

Filter weights (``filt[i * K + j]``, ``__constant__`` arrays) are read by every thread at the same
index: they stay as they are (one broadcast per warp).

Rewrite (params ``(bx, by, halo)``: the block and the tile's halo on each side): before anything
else, the block's threads load ``(by + 2 halo) x (bx + 2 halo)`` input elements (zero outside the
image) into ``__shared__ T tile[...]`` and synchronise; every tap then reads the tile when its
position lies in it and the original global element otherwise, so the result is the same for any
halo (one that covers the filter's radius never falls back).  The body is otherwise unchanged —
same taps in the same order, bit-identical results.  The block becomes ``(bx, by)`` when the
spec's grid follows the block (``cdiv(w, block_x)``...); otherwise the spec's own constant block
is kept (with the halo of the parameter value).
"""

from __future__ import annotations

import ast
from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from cudasrc.launch import LaunchChange
from engine import constant_dims
from engine.passes import PAD, Emitter, Match, NotApplicable, Outcome, Pass
from engine.view import (
    Expander,
    KernelView,
    Poly,
    global_index,
    poly_add,
    poly_render,
    poly_split,
    poly_uniform,
    statements,
    unparenthesized,
)

Node = tree_sitter.Node


@dataclass(frozen=True)
class Tap:
    node: Node  # the subscript expression ``in[...]``
    row: Poly | None  # offset of the row from the thread's row (None: a 1-D stencil)
    col: Poly  # offset of the column from the thread's column


@dataclass(frozen=True)
class StencilMatch(Match):
    src: str  # the input array read through the tile
    width: str  # W, the row stride and the column bound (C text)
    height: str  # H, the row bound ("" for a 1-D stencil)
    taps: tuple[Tap, ...]
    atoms: tuple[tuple[str, str], ...]  # atom key -> C text of the offsets
    radius: int  # the largest offset when the filter loops have literal bounds (0: unknown)
    literal: bool = False  # the indices use the block's size as a number: keep the spec's block


@dataclass
class BlockExpander(Expander):
    """An :class:`Expander` that reads ``blockIdx.x * 16`` as ``blockIdx.x * blockDim.x`` when the
    spec's block is the constant ``(16, ...)``; ``literal`` records that it did (the rewrite must
    then keep that block)."""

    shape: tuple[int, ...] = ()  # the spec's constant block
    literal: bool = False

    def poly(self, n: Node) -> Poly | None:
        p = super().poly(n)
        if p is None:
            return None
        out: Poly = {}
        for m, c in p.items():
            for axis, size in zip("xy", self.shape, strict=False):
                if f"blockIdx.{axis}" in m and f"blockDim.{axis}" not in m and c % size == 0 and size > 1:
                    m, c = tuple(sorted((*m, f"blockDim.{axis}"))), c // size
                    self.literal = True
            out = poly_add(out, {m: c})
        return out


def constant_block(view: KernelView) -> tuple[int, ...] | None:
    """The spec's block dimensions when all of them are integer constants."""
    return constant_dims(view.subject.block)


def over_block(expr: str) -> bool:
    """Whether the spec expression ``expr`` is written over ``block``/``block_x``/``block_y``."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        return False
    return any(isinstance(n, ast.Name) and n.id.startswith("block") for n in ast.walk(tree))


def grid_follows_block(view: KernelView) -> bool:
    """Whether the spec's grid is written over the block in every dimension that has more than one
    block, so a new block size keeps the grid covering the problem."""
    return all(over_block(d) or d.strip() == "1" for d in view.subject.grid)


def conjuncts(view: KernelView, node: Node, top: Node) -> list[Node]:
    """The terms of every condition that holds where ``node`` runs, up to ``top``: enclosing
    ``if`` conditions (``node`` in the consequence) and ``?:`` conditions (in the true branch),
    split at ``&&``."""
    out: list[Node] = []
    child, up = node, node.parent
    while up is not None and child != top:
        cond = None
        if up.type == "if_statement" and up.child_by_field_name("consequence") == child:
            clause = up.child_by_field_name("condition")
            cond = clause.child_by_field_name("value") if clause is not None else None
        elif up.type == "conditional_expression" and up.child_by_field_name("consequence") == child:
            cond = up.child_by_field_name("condition")
        out += split(view, cond, "&&")
        child, up = up, up.parent
    return out


def split(view: KernelView, cond: Node | None, joiner: str) -> list[Node]:
    """The terms of ``cond`` joined by ``joiner`` (``&&`` or ``||``), parentheses removed."""
    out: list[Node] = []
    stack = [cond]
    while stack:
        t = unparenthesized(stack.pop())
        if t is not None and t.type == "binary_expression" and view.text(t.children[1]) == joiner:
            stack += [t.child_by_field_name("left"), t.child_by_field_name("right")]
        elif t is not None:
            out.append(t)
    return out


def different(expand: Expander, view: KernelView, term: Node, negate: bool) -> Poly | None:
    """``a - b`` when ``term`` (negated when ``negate``) says ``a != b``."""
    if term.type != "binary_expression" or view.text(term.children[1]) != ("==" if negate else "!="):
        return None
    left, right = term.child_by_field_name("left"), term.child_by_field_name("right")
    a = expand.poly(left) if left is not None else None
    b = expand.poly(right) if right is not None else None
    return poly_add(a, b, -1) if a is not None and b is not None else None


_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def at_least_zero(expand: Expander, view: KernelView, term: Node, negate: bool = False) -> Poly | None:
    """``term`` (a comparison, or its negation) as ``q >= 0`` over integers, or None."""
    if term.type != "binary_expression":
        return None
    op = view.text(term.children[1])
    op = _NEGATED.get(op, "") if negate else op
    left, right = term.child_by_field_name("left"), term.child_by_field_name("right")
    if op not in ("<", "<=", ">", ">=") or left is None or right is None:
        return None
    a, b = expand.poly(left), expand.poly(right)
    if a is None or b is None:
        return None
    q = poly_add(b, a, -1) if op in ("<", "<=") else poly_add(a, b, -1)
    return poly_add(q, {(): -1}) if op in ("<", ">") else q


def guards(view: KernelView, node: Node) -> list[tuple[Node, bool]]:
    """The comparisons that hold where ``node`` runs, each with whether it holds negated: the
    enclosing conditions, and the terms of ``if (a || b) return;`` before its statement."""
    out = [(t, False) for t in conjuncts(view, node, view.body)]
    child, up = node, node.parent
    while up is not None and child != view.body:  # in an `else`: each term of the `||` is false
        holder = up.parent
        if up.type == "else_clause" and holder is not None and holder.type == "if_statement":
            clause = holder.child_by_field_name("condition")
            value = clause.child_by_field_name("value") if clause is not None else None
            out += [(t, True) for t in split(view, value, "||")]
        child, up = up, up.parent
    top = node
    while top.parent is not None and top.parent != view.body:
        top = top.parent
    for s in view.body.named_children:
        if s.start_byte >= top.start_byte:
            break
        conseq = s.child_by_field_name("consequence") if s.type == "if_statement" else None
        if conseq is None or s.child_by_field_name("alternative") is not None:
            continue
        if [c.type for c in statements(conseq)] != ["return_statement"]:
            continue
        clause = s.child_by_field_name("condition")
        out += [(t, True) for t in split(view, clause.child_by_field_name("value") if clause else None, "||")]
    return out


def facts_at(view: KernelView, expand: Expander, node: Node) -> list[Poly]:
    """What holds where ``node`` runs, as polynomials ``q >= 0``: the thread's global indices,
    the comparisons of :func:`guards`, and ``d - 1 >= 0`` from ``d != 0`` with ``d >= 0`` known
    (``x != 0`` in the ``else`` of ``x == 0 || ...``)."""
    facts = [global_index("x"), global_index("y")]  # thread positions are never negative
    held = guards(view, node)
    facts += [q for t, neg in held if (q := at_least_zero(expand, view, t, neg)) is not None]
    unequal = [d for t, neg in held if (d := different(expand, view, t, neg)) is not None]
    signed = [side for d in unequal for side in (d, poly_add({}, d, -1))]
    return facts + [poly_add(side, {(): -1}) for side in signed if side in facts]


def upper_bound(q: Poly, pos: Poly) -> str:
    """``B`` when the fact ``q >= 0`` gives ``pos < B`` for a single atom ``B`` ("" otherwise)."""
    bound = poly_add(poly_add(q, pos), {(): 1})  # pos < bound
    over = bound.pop((), 0)
    (mono, coeff), *more = list(bound.items()) or [((), 0)]
    return mono[0] if over <= 0 and not more and coeff == 1 and len(mono) == 1 else ""


def _offset(index: Poly, axis: str) -> Poly | None:
    """``index - (global index along axis)`` when it is uniform across the block."""
    off = poly_add(index, global_index(axis), -1)
    return off if poly_uniform(off) else None


def _free_names(view: KernelView) -> frozenset[str]:
    """The names that are atoms of the tap offsets: loop variables (and other uniform locals
    assigned again), and the upper-case names the kernel does not declare (macros)."""
    loop_vars = {lp.var for lp in view.loops if lp.var}
    loop_vars |= {  # uniform locals assigned again, e.g. loop variables declared before the loop
        n
        for n, loc in view.locals.items()
        if loc.reassigned and not loc.pointer and n not in view.thread_dependent
    }
    declared = set(view.locals) | set(view.params) | loop_vars
    outside = {
        view.text(n)
        for n in view.nodes
        if n.type == "identifier" and view.text(n) not in declared and view.text(n).isupper()
    }
    return frozenset(loop_vars | outside)


class StencilTile(Pass[StencilMatch]):
    name = "StencilTile"
    space = ((32, 8, 8), (32, 8, 2), (32, 8, 4), (16, 16, 8), (32, 16, 8), (64, 4, 8), (32, 4, 16))

    def match(self, view: KernelView) -> StencilMatch | NotApplicable:
        if view.cooperation:
            return NotApplicable(f"the kernel already uses {view.cooperation}")
        free = _free_names(view)
        # the view's own folding of literal block sizes is off here: this expander folds them itself
        # and records that it did (the rewrite must then keep the spec's block)
        expand = BlockExpander(**{**vars(view.expander(free)), "block": {}}, shape=constant_block(view) or ())
        reads: dict[str, list[Node]] = {}
        written = set()
        for a in view.accesses:
            if a.written or a.address:
                written.add(a.array)
            elif a.array in view.params and view.params[a.array].pointer == 1 and a.array == a.via:
                reads.setdefault(a.array, []).append(a.node)
        why = []
        for src, nodes in reads.items():
            if src in written:
                continue
            found = self._taps(view, expand, src, nodes)
            if isinstance(found, NotApplicable):
                why.append(f"{src}: {found.reason}")
                continue
            width, height, taps = found
            return StencilMatch(
                view,
                src,
                width,
                height,
                taps,
                tuple(expand.atoms.items()),
                self._radius(view),
                expand.literal,
            )
        return NotApplicable("; ".join(why) or "no input array is read at offsets of the thread's position")

    def _taps(
        self, view: KernelView, expand: Expander, src: str, nodes: list[Node]
    ) -> tuple[str, str, tuple[Tap, ...]] | NotApplicable:
        taps: list[Tap] = []
        widths, heights = set(), set()
        for n in nodes:
            idx = view._index_node(n)
            p = expand.poly(idx) if idx is not None else None
            if p is None:
                return NotApplicable(f"no canonical index in `{view.text(n)}`")
            tap = None
            for w in sorted({a for m in p for a in m if a in view.params and view.params[a].pointer == 0}):
                row, col = poly_split(p, w)
                r, c = _offset(row, "y"), _offset(col, "x")
                if row and r is not None and c is not None:
                    tap, width = Tap(n, r, c), w
                    break
            if tap is None and (c := _offset(p, "x")) is not None:
                tap, width = Tap(n, None, c), ""
            if tap is None:
                return NotApplicable(f"no tap: `{view.text(n)}` is not at an offset of the thread's position")
            rowp = poly_add(global_index("y"), tap.row) if tap.row is not None else None
            colp = poly_add(global_index("x"), tap.col)
            lows, highs = set(), set()
            for q in facts_at(view, expand, n):
                for axis, pos in (("row", rowp), ("col", colp)):
                    if pos is None:
                        continue
                    slack = poly_add(pos, q, -1)  # pos = q + slack
                    if set(slack) <= {()} and slack.get((), 0) >= 0:
                        lows.add(axis)
                    if (bound := upper_bound(q, pos)) and self._size(view, bound):
                        highs.add((axis, bound))
            col_bound = {b for axis, b in highs if axis == "col" and b}
            row_bound = {b for axis, b in highs if axis == "row" and b}
            need = ["col"] + (["row"] if tap.row is not None else [])
            if any(axis not in lows for axis in need) or (width and width not in col_bound) or not col_bound:
                return NotApplicable(f"the tap `{view.text(n)}` is not bounds-checked inside the image")
            if tap.row is not None and not row_bound:
                return NotApplicable(f"the tap `{view.text(n)}` has no row bound")
            widths.add(width or min(col_bound))
            heights.add(min(row_bound) if tap.row is not None else "")
            taps.append(tap)
        if len(widths) != 1 or len(heights) != 1:
            return NotApplicable("the taps do not share one image size")
        offsets = {(tuple(sorted((t.row or {}).items())), tuple(sorted(t.col.items()))) for t in taps}
        if len(offsets) < 2 and all(set(t.col) <= {()} and set(t.row or {}) <= {()} for t in taps):
            return NotApplicable(
                f"`{src}` is read at one position per thread: there is no neighbourhood to share"
            )
        return widths.pop(), heights.pop(), tuple(taps)

    @staticmethod
    def _size(view: KernelView, atom: str) -> bool:
        """Whether ``atom`` can bound an image: a scalar parameter or a macro."""
        p = view.params.get(atom)
        return (p is not None and p.pointer == 0) or (atom.isupper() and atom not in view.locals)

    @staticmethod
    def _radius(view: KernelView) -> int:
        """The largest literal loop bound (a filter of ``2r + 1`` taps has bound ``2r + 1``)."""
        bounds = [
            int(view.text(lp.bound))
            for lp in view.loops
            if lp.bound is not None and view.text(lp.bound).isdigit()
        ]
        return max(bounds) // 2 if bounds else 0

    def guess(self, match: StencilMatch) -> Hashable:
        if match.radius:
            fits = [p for p in self.space if isinstance(p, tuple) and p[2] >= match.radius]
            if fits:
                return min(fits, key=lambda p: (p[2], self.space.index(p)))
        return self.space[0]

    def rewrite(self, match: StencilMatch, params: Hashable) -> Outcome:
        assert isinstance(params, tuple)
        bx, by, halo = params
        view = match.view
        two_d = bool(match.height)
        if not two_d:
            bx, by = bx * by, 1
        launch = None
        fixed = constant_block(view)
        if match.literal or not grid_follows_block(view):  # the spec's own block, with this halo
            shape = (*fixed, 1)[:2] if fixed is not None else None
            if shape is None or (not two_d and shape[1] != 1):
                return NotApplicable("the spec's grid does not follow its block, which is not a constant")
            bx, by = shape
        elif fixed not in ((bx, by), (bx,) if by == 1 else (bx, by)):
            launch = LaunchChange(block=f"({bx}, {by})" if two_d else str(bx))
        e = Emitter(view)
        tile, y0, x0, k = e.fresh("tile"), e.fresh("y0"), e.fresh("x0"), e.fresh("k")
        elem = view.params[match.src].base_type
        th, tw = (by + 2 * halo, bx + 2 * halo) if two_d else (1, bx + 2 * halo)
        atoms = dict(match.atoms)
        r, c = f"({y0} + {k} / {tw})", f"({x0} + {k} % {tw})"
        inside = f"{c} >= 0 && {c} < {match.width}"
        load = f"{match.src}[{c}]"
        if two_d:
            inside = f"{r} >= 0 && {r} < {match.height} && " + inside
            load = f"{match.src}[(size_t){r} * {match.width} + {c}]"
        lines = [
            f"// cuda-agent: {th}x{tw} shared input tile (halo {halo}) loaded once per {bx}x{by} block",
            f"__shared__ {elem} {tile}[{th}][{tw}];",
            f"const int {y0} = {'(int)(blockIdx.y * ' + str(by) + ') - ' + str(halo) if two_d else '0'};",
            f"const int {x0} = (int)(blockIdx.x * {bx}) - {halo};",
            f"for (int {k} = threadIdx.y * {bx} + threadIdx.x; {k} < {th * tw}; {k} += {bx * by})",
            f"{PAD}{tile}[{k} / {tw}][{k} % {tw}] = ({inside}) ? {load} : ({elem})0;",
            "__syncthreads();",
        ]
        first = view.body.named_children[0] if view.body.named_child_count else None
        pad = e.indent(first) if first is not None else PAD
        text = "\n".join(lines[:1] + [pad + s for s in lines[1:]]) + "\n" + pad
        if first is None:
            return NotApplicable("the kernel body is empty")
        e.insert_before(first, text)
        for tap in match.taps:
            lx = f"(int)threadIdx.x + {halo} + ({poly_render(tap.col, atoms, False)})"
            ly = (
                f"(int)threadIdx.y + {halo} + ({poly_render(tap.row, atoms, False)})"
                if tap.row is not None
                else "0"
            )
            check = f"(unsigned)({lx}) < {tw}u" + (f" && (unsigned)({ly}) < {th}u" if two_d else "")
            e.replace(tap.node, f"({check} ? {tile}[{ly}][{lx}] : {view.text(tap.node)})")
        return e.rewrite(f"shared input tile with a halo of {halo} ({bx}x{by} block)", launch)
