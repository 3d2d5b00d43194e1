"""Stencil tile: a thread-per-output stencil or convolution reads its input through a shared tile
with its halo, loaded once per block, instead of every tap from global memory.

Matches (on the :class:`~engine.view.KernelView`) a kernel without shared memory,
barriers, atomics or shuffles whose reads of one input array ``in`` (a pointer parameter it never
writes) are all *taps* ``in[row * W + col]`` where, in canonical form,

- ``row`` is the 2-D thread row ``blockIdx.y * blockDim.y + threadIdx.y`` plus an offset and
  ``col`` the thread column (``x`` twin) plus an offset — or, where the access maps say every
  read steps by one element as ``threadIdx.y`` steps and never as ``threadIdx.x`` does (ParRes'
  ``in[(i)*n+(j-1)]`` with ``i`` the thread's x index), the row along ``x`` and the column along
  ``y`` (:func:`_axes`) — each offset the same for every thread of
  the block (filter loop variables, constants, macros, uniform locals: ``in[(y + i - R) * w + x + j - R]``
  through any locals, casts or operand order), ``W`` a scalar parameter (a 1-D stencil,
  ``in[x + j - R]``, has no row);
- each tap is either *guarded* — enclosing ``if`` conditions, ``?:`` conjunctions, or an earlier
  ``if (outside) return;`` / ``continue;`` — by bounds that keep it inside the image, ``0 <= row
  < H`` and ``0 <= col < W`` (any comparison spelling: ``yy >= 0``, ``0 <= yy``, ``yy > -1``,
  ``yy < h``, ``h > yy`` ...), ``H`` uniform; or *unguarded* (a "valid" convolution,
  ``in[(y + r) * W + x + c]``): its offsets are loop variables over uniform ranges (rows and
  columns over different loops), it runs on every iteration of its loops, and the guards around
  the loops bound the thread's row and column (``row < H - K + 1``) or are the same for the whole
  block.  An unguarded tap's :class:`Footprint` is where its threads read: from the first active
  row plus the smallest offset to the last active row plus the largest, the same for columns.

Filter weights (``filt[i * K + j]``, ``__constant__`` arrays) are read by every thread at the same
index: they stay as they are (one broadcast per warp).

Rewrite (params ``(bx, by, halo)``: the block and the tile's halo on each side): before anything
else, the block's threads load ``(by + 2 halo) x (bx + 2 halo)`` input elements (zero outside the
image; for unguarded taps, every element some thread of the block reads and no other) into
``__shared__ T tile[...]`` and synchronise; every tap then reads the tile when its position lies
in it and the original global element otherwise, so the result is the same for any halo (one that
covers the filter's radius never falls back; rows along ``x``: the tile is indexed
``[threadIdx.x][threadIdx.y]``, its row pitch odd so that a warp reading down a column of it
spreads over the banks).  A tap whose loops have constant ends that the halo
covers (``for (fy = 0; fy < FILTER_WIDTH; ++fy)``, ``y = row + fy - FILTER_RADIUS``) reads the tile
directly: no check, no fallback.  The body is otherwise unchanged —
same taps in the same order, bit-identical results.  The block becomes ``(bx, by)`` when the
spec's grid follows the block (``cdiv(w, block_x)``...); otherwise the spec's own constant block
is kept (with the halo of the parameter value).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from cudasrc.launch import LaunchChange
from cudasrc.specs import ArraySpec, InvalidSpec, bench_sizes, evaluate, verify_sizes
from engine.guards import (
    at_least_zero,
    constant_block,
    facts_at,
    grid_follows_block,
    guards,
    stores_kept,
    upper_bound,
)
from engine.passes import PAD, Emitter, Match, NotApplicable, Outcome, Pass
from engine.view import (
    Access,
    Expander,
    KernelView,
    Loop,
    Poly,
    global_index,
    poly_add,
    poly_render,
    poly_split,
    poly_uniform,
    walk,
)

Node = tree_sitter.Node


@dataclass(frozen=True)
class TapSpan:
    """The offsets a tap takes over its loops along one axis, ``lo`` to ``hi`` (uniform)."""

    lo: Poly
    hi: Poly


@dataclass(frozen=True)
class Footprint:
    """Where the threads that run an unguarded tap read (a "valid" convolution:
    ``in[(y + i) * W + x + j]`` with no bounds check of its own): the active threads' rows and
    columns lie between the bounds of their guards (``gy >= lo`` for each of ``rows_lo``, ``gy <
    hi`` for each of ``rows_hi``; the same for columns) and every offset between the spans' ends
    is read; ``uniform``: the guards that are the same for the whole block, as written."""

    rows: TapSpan | None
    cols: TapSpan
    rows_lo: tuple[Poly, ...]
    rows_hi: tuple[Poly, ...]
    cols_lo: tuple[Poly, ...]
    cols_hi: tuple[Poly, ...]
    uniform: tuple[str, ...]


@dataclass(frozen=True)
class Filter:
    """An array every thread of the block reads at the same indices (filter weights), all of them
    between ``lo`` and ``hi`` (constants, inside the spec's extent of the array): staged in shared
    memory with the tile."""

    array: str
    lo: int
    hi: int
    reads: tuple[Node, ...]  # the subscripts that read it


@dataclass(frozen=True)
class Tap:
    node: Node  # the subscript expression ``in[...]``
    row: Poly | None  # offset of the row from the thread's row (None: a 1-D stencil)
    col: Poly  # offset of the column from the thread's column
    spans: tuple[TapSpan | None, TapSpan] | None = (
        None  # the (row, col) offsets its loops reach (constant ends)
    )
    footprint: Footprint | None = None  # an unguarded tap: where its threads read


@dataclass(frozen=True)
class StencilMatch(Match):
    src: str  # the input array read through the tile
    width: str  # W, the row stride and the column bound (C text)
    height: str  # H, the row bound ("" for a 1-D stencil without guarded taps)
    taps: tuple[Tap, ...]
    atoms: tuple[tuple[str, str], ...]  # atom key -> C text of the offsets
    radius: int  # the largest offset when the filter loops have literal bounds (0: unknown)
    literal: bool = False  # the indices use the block's size as a number: keep the spec's block
    two_d: bool = True  # the taps have rows
    filters: tuple[Filter, ...] = ()  # arrays every thread reads at the same indices (the weights)
    axes: tuple[str, str] = ("y", "x")  # the thread axes of the image's rows and of its columns


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


def _expander(view: KernelView) -> BlockExpander:
    """The expander of the taps' indices: the view's own folding of literal block sizes is off
    here, this one folds them itself and records that it did (the rewrite must then keep the
    spec's block)."""
    plain = view.expander(_free_names(view))
    return BlockExpander(**{**vars(plain), "block": {}}, shape=constant_block(view) or ())


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


def _loops_of(view: KernelView, node: Node) -> list[Loop]:
    """The loops enclosing ``node``, innermost first."""
    out = []
    for lp in view.loops:
        if lp.body.start_byte <= node.start_byte and node.end_byte <= lp.body.end_byte:
            out.append(lp)
    return sorted(out, key=lambda lp: -lp.node.start_byte)


def _span(view: KernelView, off: Poly, loops: list[Loop]) -> tuple[TapSpan, frozenset[str]] | None:
    """The ends of ``off`` (an offset over loop variables with unit coefficients) as its loops run
    (each loop ``for (v = S; v < B; ++v)`` or ``v <= B``, bounds uniform), and the variables it
    uses; None when it is not such an offset."""
    lo: Poly = {}
    hi: Poly = {}
    rest, used = dict(off), set()
    for lp in loops:
        if not lp.var or lp.var not in {a for m in rest for a in m}:
            continue
        coeff, rest = poly_split(rest, lp.var)
        if set(coeff) != {()} or abs(coeff[()]) != 1 or lp.step != 1 or lp.start is None or lp.bound is None:
            return None
        names = frozenset(x.var for x in loops if x.var)
        start, bound = view.poly(lp.start, names), view.poly(lp.bound, names)
        if start is None or bound is None or lp.op not in ("<", "<="):
            return None
        if (
            not poly_uniform(start)
            or not poly_uniform(bound)
            or any(a in names for m in (*start, *bound) for a in m)
        ):
            return None
        end = poly_add(bound, {(): -1}) if lp.op == "<" else bound
        first, last = (
            (start, end)
            if coeff[()] > 0
            else ({m: -c for m, c in end.items()}, {m: -c for m, c in start.items()})
        )
        lo, hi = poly_add(lo, first), poly_add(hi, last)
        used.add(lp.var)
    if not poly_uniform(rest) or any(lp.var in m for lp in loops for m in rest if lp.var):
        return None
    fold = view.front.constants  # macros kept as atoms for the rewrite's text: their values here
    return TapSpan(_folded(poly_add(lo, rest), fold), _folded(poly_add(hi, rest), fold)), frozenset(used)


def _folded(p: Poly, constants: dict[str, int]) -> Poly:
    """``p`` with the atoms that are the unit's integer constants replaced by their values."""
    out: Poly = {}
    for mono, c in p.items():
        rest = tuple(a for a in mono if a not in constants)
        for a in mono:
            if a in constants:
                c *= constants[a]
        out = poly_add(out, {rest: c})
    return out


def _spans(view: KernelView, n: Node, tap: Tap) -> tuple[TapSpan | None, TapSpan] | None:
    """The row and column spans of a tap whose axes run over different loop variables."""
    loops = _loops_of(view, n)
    col = _span(view, tap.col, loops)
    row = _span(view, tap.row, loops) if tap.row is not None else None
    if col is None or (tap.row is not None and row is None):
        return None
    if row is not None and row[1] & col[1]:
        return None  # a diagonal: its footprint is no rectangle
    return (row[0] if row is not None else None), col[0]


def _unconditional(view: KernelView, n: Node, outer: Node) -> bool:
    """Whether ``n`` runs on every iteration of the loops up to ``outer``: no condition, jump or
    short-circuit between them."""
    child, up = n, n.parent
    while up is not None and child != outer:
        if up.type in ("if_statement", "conditional_expression", "switch_statement", "while_statement"):
            cond = up.child_by_field_name("condition")
            if cond is None or not (cond.start_byte <= child.start_byte < cond.end_byte):
                return False
        if up.type == "binary_expression" and view.text(up.children[1]) in ("&&", "||"):
            return False
        child, up = up, up.parent
    return not any(
        x.type in ("continue_statement", "break_statement", "return_statement", "goto_statement")
        for x in walk(outer)
    )


def _footprint(
    view: KernelView, expand: Expander, n: Node, tap: Tap, axes: tuple[str, str]
) -> Footprint | NotApplicable:
    """Where the threads that run the unguarded tap ``n`` read (:class:`Footprint`); ``axes``:
    the thread axes of the image's rows and columns."""
    loops = _loops_of(view, n)
    if tap.spans is None or not loops:
        return NotApplicable("its offsets are not loop variables over uniform ranges")
    if not _unconditional(view, n, loops[-1].node):
        return NotApplicable("it does not run on every iteration of its loops")
    bounds: dict[str, tuple[list[Poly], list[Poly]]] = {axis: ([], []) for axis in axes}
    uniform = []
    for term, neg in guards(view, loops[-1].node):
        q = at_least_zero(expand, view, term, neg)
        found = False
        for axis in axes if q is not None else ():
            g = global_index(axis)
            assert q is not None
            if poly_uniform(low := poly_add(q, g, -1)):  # g + u >= 0: g >= -u
                bounds[axis][0].append({m: -c for m, c in low.items()})
                found = True
            elif poly_uniform(high := poly_add(q, g)):  # u - g >= 0: g < u + 1
                bounds[axis][1].append(poly_add(high, {(): 1}))
                found = True
        if found:
            continue
        if view.uniform(term) and not view.names(term) & set(view.locals):
            uniform.append(f"{'!' if neg else ''}({view.text(term)})")  # loaded before the kernel's locals
            continue
        return NotApplicable(f"its guard `{view.text(term)}` is not a bound of the thread's row or column")
    rows, cols = tap.spans
    return Footprint(
        rows,
        cols,
        tuple(bounds[axes[0]][0]),
        tuple(bounds[axes[0]][1]),
        tuple(bounds[axes[1]][0]),
        tuple(bounds[axes[1]][1]),
        tuple(uniform),
    )


def _ends(span: TapSpan) -> tuple[int, ...]:
    """The span's ends when both are constants, else ()."""
    if set(span.lo) <= {()} and set(span.hi) <= {()}:
        return span.lo.get((), 0), span.hi.get((), 0)
    return ()


def _read(
    fp: Footprint, r: str, c: str, block: dict[str, int], axes: tuple[str, str], atoms: dict[str, str]
) -> str:
    """The C condition that the element at row ``r``, column ``c`` is read by the unguarded tap
    of ``fp`` in this block (``block``: its size along each thread axis; ``axes``: the thread
    axes of rows and columns): its threads' rows run from the largest of their lower bounds to
    the smallest of their upper ones (at least one thread, at least one offset), the offsets from
    the span's ``lo`` to ``hi``."""

    def text(p: Poly) -> str:
        return f"({poly_render(p, atoms, False)})"

    def plus(p: Poly) -> str:
        return f" + {text(p)}" if p else ""

    terms = []
    row_axis, col_axis = axes
    sides = [(col_axis, c, fp.cols, fp.cols_lo, fp.cols_hi, block[col_axis])]
    if fp.rows is not None:
        sides.append((row_axis, r, fp.rows, fp.rows_lo, fp.rows_hi, block[row_axis]))
    for axis, at, span, lows, highs, size in sides:
        start = f"(int)(blockIdx.{axis} * {size})"
        firsts = [start, *(text(p) for p in lows)]
        ends = [f"{start} + {size}", *(text(p) for p in highs)]
        terms += [f"{at} >= {f}{plus(span.lo)}" for f in firsts]
        terms += [f"{at} < {e}{plus(span.hi)}" for e in ends]
        terms += [f"{f} < {e}" for f in firsts[1:] for e in ends] + [f"{start} < {e}" for e in ends[1:]]
        if not _ends(span) or _ends(span)[0] > _ends(span)[1]:
            terms.append(f"{text(span.lo)} <= {text(span.hi)}")
    return " && ".join(terms + list(fp.uniform))


MAX_FILTER = 4096  # elements of a filter staged in shared memory


def _filter(view: KernelView, name: str, reads: list[Node]) -> Filter | None:
    """``name`` as a :class:`Filter` when every read of it is at an index the same for every thread,
    over loop variables whose loops have constant ends (or constants), all of the indices inside the
    spec's extent of the array."""
    if view.params[name].pointer != 1:
        return None
    loops = {lp.var: lp for lp in view.loops if lp.var}
    lo = hi = None
    for n in reads:
        idx = view._index_node(n)
        p = view.poly(idx, frozenset(loops)) if idx is not None else None
        if p is None or not poly_uniform(p):
            return None
        low = high = p.pop((), 0)
        for mono, c in p.items():
            lp = loops.get(mono[0]) if len(mono) == 1 else None
            span = _span(view, {mono: 1}, [lp]) if lp is not None else None
            ends = _ends(span[0]) if span is not None else ()
            if not ends:
                return None
            low, high = low + min(c * ends[0], c * ends[1]), high + max(c * ends[0], c * ends[1])
        lo, hi = (low, high) if lo is None or hi is None else (min(lo, low), max(hi, high))
    if lo is None or hi is None or lo < 0 or hi - lo + 1 > MAX_FILTER:
        return None
    spec = next((a for a in view.subject.spec.args if isinstance(a, ArraySpec) and a.name == name), None)
    if spec is None:
        return None
    try:
        every = [bench_sizes(view.subject.spec), *verify_sizes(view.subject.spec)]
        if any(evaluate(spec.count, dict(z)) <= hi for z in every):
            return None
    except (InvalidSpec, ValueError, TypeError):
        return None
    return Filter(name, lo, hi, tuple(reads))


def _axes(view: KernelView, reads: list[Access]) -> tuple[str, str]:
    """The thread axes of the image's rows and columns: ``("x", "y")`` when, per the access maps,
    every read moves by one element as ``threadIdx.y`` steps and never by one as ``threadIdx.x``
    does (``in[i * n + j]`` with ``i`` the thread's x index: rows along x), at every problem;
    ``("y", "x")`` otherwise."""
    for a in reads:
        along_y, along_x = view.maps.strides(a, "ty"), view.maps.strides(a, "tx")
        if isinstance(along_y, str) or isinstance(along_x, str):
            return "y", "x"
        if not all(s == {1} for s in along_y) or any(1 in s for s in along_x):
            return "y", "x"
    return "x", "y"


class StencilTile(Pass[StencilMatch]):
    name = "StencilTile"
    space = ((32, 8, 8), (32, 8, 2), (32, 8, 4), (16, 16, 8), (32, 16, 8), (64, 4, 8), (32, 4, 16))

    def match(self, view: KernelView) -> StencilMatch | NotApplicable:
        if view.cooperation:
            return NotApplicable(f"the kernel already uses {view.cooperation}")
        expand = _expander(view)
        reads: dict[str, list[Access]] = {}
        written = set()
        for a in view.accesses:
            if a.written or a.address:
                written.add(a.array)
            elif a.array in view.params and view.params[a.array].pointer == 1 and a.array == a.via:
                reads.setdefault(a.array, []).append(a)
        why = []
        for src, accesses in reads.items():
            if src in written:
                continue
            axes = _axes(view, accesses)
            found = self._taps(view, expand, src, [a.node for a in accesses], axes)
            if isinstance(found, NotApplicable):
                why.append(f"{src}: {found.reason}")
                continue
            width, height, taps = found
            filters = tuple(
                f
                for name, reads_of in reads.items()
                if name != src
                and name not in written
                and (f := _filter(view, name, [a.node for a in reads_of])) is not None
            )
            reach = [abs(c) for t in taps for sp in (t.spans or ()) if sp is not None for c in _ends(sp)]
            return StencilMatch(
                view,
                src,
                width,
                height,
                taps,
                tuple(expand.atoms.items()),
                max(reach) if taps and all(t.spans for t in taps) and reach else self._radius(view),
                expand.literal,
                any(t.row is not None for t in taps),
                filters,
                axes,
            )
        return NotApplicable("; ".join(why) or "no input array is read at offsets of the thread's position")

    def _taps(
        self, view: KernelView, expand: Expander, src: str, nodes: list[Node], axes: tuple[str, str]
    ) -> tuple[str, str, tuple[Tap, ...]] | NotApplicable:
        taps: list[Tap] = []
        widths, heights, strides = set(), set(), set()
        for n in nodes:
            idx = view._index_node(n)
            p = expand.poly(idx) if idx is not None else None
            if p is None:
                return NotApplicable(f"no canonical index in `{view.text(n)}`")
            tap = None
            for w in sorted({a for m in p for a in m if a in view.params and view.params[a].pointer == 0}):
                row, col = poly_split(p, w)
                r, c = _offset(row, axes[0]), _offset(col, axes[1])
                if row and r is not None and c is not None:
                    tap, width = Tap(n, r, c), w
                    break
            if tap is None and axes[1] == "x" and (c := _offset(p, "x")) is not None:
                tap, width = Tap(n, None, c), ""
            if tap is None:
                return NotApplicable(f"no tap: `{view.text(n)}` is not at an offset of the thread's position")
            spans = _spans(view, n, tap)
            tap = Tap(n, tap.row, tap.col, spans)
            bounds = self._bounds(view, expand, n, tap, width, axes)
            if isinstance(bounds, NotApplicable):
                fp = _footprint(view, expand, n, tap, axes)
                if isinstance(fp, NotApplicable) or (not width and tap.row is not None):
                    why = fp.reason if isinstance(fp, NotApplicable) else "no row stride"
                    return NotApplicable(f"{bounds.reason}, and unguarded: {why}")
                tap = Tap(n, tap.row, tap.col, spans, fp)
                strides.add(width)
            else:
                widths.add(bounds[0])
                heights.add(bounds[1])
                strides.add(width or bounds[0])
            taps.append(tap)
        if len(widths) > 1 or len(heights) > 1 or len(strides) != 1:
            return NotApplicable("the taps do not share one image size")
        if widths and widths != strides:
            return NotApplicable("the guarded taps' column bound is not the row stride")
        offsets = {(tuple(sorted((t.row or {}).items())), tuple(sorted(t.col.items()))) for t in taps}
        if len(offsets) < 2 and all(set(t.col) <= {()} and set(t.row or {}) <= {()} for t in taps):
            return NotApplicable(
                f"`{src}` is read at one position per thread: there is no neighbourhood to share"
            )
        return strides.pop(), heights.pop() if heights else "", tuple(taps)

    def _bounds(
        self, view: KernelView, expand: Expander, n: Node, tap: Tap, width: str, axes: tuple[str, str]
    ) -> tuple[str, str] | NotApplicable:
        """(W, H) where the tap ``n`` is guarded inside the image ``0 <= row < H``, ``0 <= col < W``
        (H "" for a 1-D tap), the row and column along the thread axes ``axes``."""
        rowp = poly_add(global_index(axes[0]), tap.row) if tap.row is not None else None
        colp = poly_add(global_index(axes[1]), tap.col)
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
        return width or min(col_bound), min(row_bound) if tap.row is not None else ""

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
        two_d = match.two_d
        if not two_d:
            bx, by = bx * by, 1
        launch = None
        fixed = constant_block(view)
        unbounded = any(  # threads no guard bounds read by the launch: keep it
            t.footprint is not None and (not t.footprint.cols_hi or (two_d and not t.footprint.rows_hi))
            for t in match.taps
        )
        follows = grid_follows_block(view)
        # a new block must not change which threads store (an unguarded `out[y * w + x] = ...`)
        moved = stores_kept(view, _expander(view), (bx, by)) if follows else ""
        if match.literal or unbounded or moved or not follows:  # the spec's own block, with this halo
            shape = (*fixed, 1)[:2] if fixed is not None else None
            if shape is None or (not two_d and shape[1] != 1):
                return NotApplicable(
                    moved or "the spec's grid does not follow its block, which is not a constant"
                )
            bx, by = shape
        elif fixed not in ((bx, by), (bx,) if by == 1 else (bx, by)):
            launch = LaunchChange(block=f"({bx}, {by})" if two_d else str(bx))
        e = Emitter(view)
        tile, y0, x0, k = e.fresh("tile"), e.fresh("y0"), e.fresh("x0"), e.fresh("k")
        elem = view.params[match.src].base_type
        sizes = {"x": bx, "y": by}
        rows, cols = match.axes if two_d else ("y", "x")
        th, tw = (sizes[rows] + 2 * halo, sizes[cols] + 2 * halo) if two_d else (1, bx + 2 * halo)
        # rows along threadIdx.x: a warp reads down a column of the tile, so its pitch is odd
        pitch = tw | 1 if rows == "x" else tw
        atoms = dict(match.atoms)
        r, c = f"({y0} + {k} / {tw})", f"({x0} + {k} % {tw})"
        load = f"{match.src}[(size_t){r} * {match.width} + {c}]" if two_d else f"{match.src}[{c}]"
        reads = []  # where some tap reads: inside the image (guarded taps), the footprints of the others
        if any(t.footprint is None for t in match.taps):
            inside = f"{c} >= 0 && {c} < {match.width}"
            reads.append(f"{r} >= 0 && {r} < {match.height} && " + inside if two_d else inside)
        for fp in {repr(t.footprint): t.footprint for t in match.taps if t.footprint is not None}.values():
            reads.append(_read(fp, r, c, sizes, (rows, cols), atoms))
        inside = reads[0] if len(reads) == 1 else " || ".join(f"({x})" for x in reads)
        lines = [
            f"// cuda-agent: {th}x{tw} shared input tile (halo {halo}) loaded once per {bx}x{by} block",
            f"__shared__ {elem} {tile}[{th}][{pitch}];",
            f"const int {y0} = {f'(int)(blockIdx.{rows} * {sizes[rows]}) - {halo}' if two_d else '0'};",
            f"const int {x0} = (int)(blockIdx.{cols} * {sizes[cols]}) - {halo};",
            f"for (int {k} = threadIdx.y * {bx} + threadIdx.x; {k} < {th * tw}; {k} += {bx * by})",
            f"{PAD}{tile}[{k} / {tw}][{k} % {tw}] = ({inside}) ? {load} : ({elem})0;",
        ]
        staged = {}
        for f in match.filters:  # the weights every thread reads, staged beside the tile
            staged[f.array] = name = e.fresh(f"{f.array}_s")
            size, at = f.hi - f.lo + 1, f" + {f.lo}" if f.lo else ""
            lines += [
                f"__shared__ {view.params[f.array].base_type} {name}[{size}];  // `{f.array}`, read alike by every thread",
                f"for (int {k} = threadIdx.y * {bx} + threadIdx.x; {k} < {size}; {k} += {bx * by})",
                f"{PAD}{name}[{k}] = {f.array}[{k}{at}];",
            ]
        lines.append("__syncthreads();")
        first = view.body.named_children[0] if view.body.named_child_count else None
        pad = e.indent(first) if first is not None else PAD
        text = "\n".join(lines[:1] + [pad + s for s in lines[1:]]) + "\n" + pad
        if first is None:
            return NotApplicable("the kernel body is empty")
        e.insert_before(first, text)
        for f in match.filters:
            for read in f.reads:
                idx = view._index_node(read)
                assert idx is not None
                e.replace(read, f"{staged[f.array]}[{view.text(idx)}{f' - {f.lo}' if f.lo else ''}]")
        for tap in match.taps:
            lx = f"(int)threadIdx.{cols} + {halo} + ({poly_render(tap.col, atoms, False)})"
            ly = (
                f"(int)threadIdx.{rows} + {halo} + ({poly_render(tap.row, atoms, False)})"
                if tap.row is not None
                else "0"
            )
            if tap.spans is not None and all(
                sp is None or (_ends(sp) and all(-halo <= end <= halo for end in _ends(sp)))
                for sp in tap.spans
            ):  # every offset its loops take lies in the tile: no check, no global fallback
                e.replace(tap.node, f"{tile}[{ly}][{lx}]")
                continue
            check = f"(unsigned)({lx}) < {tw}u" + (f" && (unsigned)({ly}) < {th}u" if two_d else "")
            e.replace(tap.node, f"({check} ? {tile}[{ly}][{lx}] : {view.text(tap.node)})")
        return e.rewrite(f"shared input tile with a halo of {halo} ({bx}x{by} block)", launch)
