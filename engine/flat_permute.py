"""Tiled flat permute: a copy ``dst[P] = src[Q]`` over a flat thread index — a transpose whose
thread reads ``in[idx]`` and writes ``out[(idx % C) * R + idx / C]``, an N-D permute whose index
is decomposed with ``/`` and ``%`` by products of its dimensions — goes through a shared tile, so
that both the reads and the writes are coalesced.

Rule (facts of the view's access maps, :mod:`engine.maps`, so the spelling of the indices
does not matter): the kernel's threads do not cooperate and run no loops; its one read and one
write form one assignment between two array parameters; the thread's element is a local ``g``
holding the 1-D global index (``blockIdx.x * blockDim.x + threadIdx.x`` in any spelling), and no
other statement reads the thread's position; at every problem of the spec

- the copy is a permutation (each element written once, each read once);
- one side is contiguous along ``threadIdx.x`` (each warp's elements one run) and the other is not; the other side is
  contiguous along a *step* ``s`` of the flat index (``idx + s`` is the other side's next
  element), ``s`` a size of the kernel (a divisor in its index arithmetic, or a product of two),
  checked at each problem through the maps' deltas;
- the flat index runs over ``[0, n)`` with ``n`` the element count of one of the spec's arrays.

Rewrite (params ``(tile, rows, pad)``): the flat index is seen as ``g = b * s + a`` (``a < s``);
blocks of ``tile x rows`` threads on a grid of ``cdiv(s, tile) x cdiv(cdiv(n, s), tile)``
tiles; each thread runs the kernel's own statements (names, macros, guards unchanged; its
``return`` skips one element) for ``tile / rows`` elements of the tile with ``g`` set to each
element's index: first with the copy replaced by a load into ``__shared__ T tile[tile][tile +
pad]`` along the contiguous side, then, after a barrier, with it replaced by the store along the
other.  Each element of the domain is copied once, by the same statement; only the order changes.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import tree_sitter

from cudasrc.launch import LaunchChange
from cudasrc.specs import ArraySpec, ScalarSpec, evaluate
from engine.maps import Permutation
from engine.passes import PAD, Emitter, Match, NotApplicable, Outcome, Pass
from engine.view import (
    POSITION,
    Access,
    KernelView,
    Poly,
    global_index,
    poly_mul,
    poly_render,
    walk,
)

Node = tree_sitter.Node
_MAX_GRID_Y = 65535


@dataclass(frozen=True)
class FlatMatch(Match):
    point: Node  # the initializer of the local holding the flat index
    copy: Node  # the assignment ``dst[P] = src[Q]``
    load: Access
    store: Access
    read_along_a: bool  # the read is the side contiguous along the flat index
    step: str  # s, over the kernel's parameters
    step_spec: str  # s, over the spec's sizes
    total_spec: str  # n, over the spec's sizes
    steps: tuple[int, ...]  # s at each problem
    totals: tuple[int, ...]  # n at each problem


class FlatPermute(Pass[FlatMatch]):
    name = "FlatPermute"
    space = ((32, 8, 1), (32, 16, 1), (64, 16, 1), (32, 8, 0))

    def match(self, view: KernelView) -> FlatMatch | NotApplicable:
        if what := view.cooperation:
            return NotApplicable(f"the kernel already uses {what}")
        if view.loops:
            return NotApplicable("the kernel runs loops: not one element per thread")
        writes = [a for a in view.accesses if a.written]
        reads = [a for a in view.accesses if not a.written]
        if len(writes) != 1 or len(reads) != 1:
            return NotApplicable("the body is not one copy `out[...] = in[...];`")
        store, load = writes[0], reads[0]
        copy = store.node.parent
        if copy is None or copy.type != "assignment_expression" or view.text(copy.children[1]) != "=":
            return NotApplicable("the write is not a plain assignment")
        right = copy.child_by_field_name("right")
        while right is not None and right.type == "parenthesized_expression":
            right = right.named_children[0]
        if right is None or right != load.node:
            return NotApplicable("the body is not one copy `out[...] = in[...];`")
        if store.array not in view.params or load.array not in view.params or store.array == load.array:
            return NotApplicable("the copy is not between two array parameters")
        point = self._point(view)
        if isinstance(point, NotApplicable):
            return point
        maps = view.maps
        perm = maps.permutation(store, load)
        if not isinstance(perm, Permutation):
            return NotApplicable(f"the copy is not a permutation: {perm}")
        read_c, write_c = maps.contiguous(load, warp=True), maps.contiguous(store, warp=True)
        if read_c == write_c:
            return NotApplicable(
                "both sides are contiguous along the flat index already"
                if read_c
                else "neither side is contiguous along the flat index"
            )
        found = self._step(view, load, store, read_c)
        if isinstance(found, NotApplicable):
            return found
        step, steps = found
        total = self._total(view, store, point)
        if isinstance(total, NotApplicable):
            return total
        total_spec, totals = total
        sizes = {a.name: a.value for a in view.subject.spec.args if isinstance(a, ScalarSpec)}
        step_spec = poly_render(step, {p: f"({sizes[p]})" for m in step for p in m}, False)
        return FlatMatch(
            view,
            point,
            copy,
            load,
            store,
            read_c,
            poly_render(step, {}, False),
            step_spec,
            total_spec,
            steps,
            totals,
        )

    @staticmethod
    def _point(view: KernelView) -> Node | NotApplicable:
        """The initializer of the one local that holds the 1-D global index; the position is read
        nowhere else."""
        found = [
            loc.value
            for loc in view.locals.values()
            if loc.value is not None
            and not loc.reassigned
            and not loc.pointer
            and view.poly(loc.value) == global_index("x")
        ]
        if len(found) != 1:
            return NotApplicable(
                "no single local holding the flat index `blockIdx.x * blockDim.x + threadIdx.x`"
            )
        point = found[0]
        for n in view.nodes:
            if (
                n.type == "field_expression"
                and view.text(n.child_by_field_name("argument") or n) in POSITION
                and not (point.start_byte <= n.start_byte < point.end_byte)
            ):
                return NotApplicable(f"the body reads `{view.text(n)}` besides the flat index")
        return point

    @staticmethod
    def _step(
        view: KernelView, load: Access, store: Access, read_c: bool
    ) -> tuple[Poly, tuple[int, ...]] | NotApplicable:
        """The size ``s`` along which the non-contiguous side is contiguous, and its values."""
        divisors: list[Poly] = []
        for a in (load, store):
            for n in _reached(view, a.node):
                if n.type == "binary_expression" and view.text(n.children[1]) in ("/", "%"):
                    right = n.child_by_field_name("right")
                    p = view.poly(right) if right is not None else None
                    scalars = {k for k, v in view.params.items() if v.pointer == 0}
                    if p and all(atom in scalars for m in p for atom in m) and p not in divisors:
                        divisors.append(p)
        candidates = list(divisors)
        for x, y in itertools.combinations(divisors, 2):
            if (q := poly_mul(x, y)) not in candidates:
                candidates.append(q)
        problems = view.maps.problems
        assert not isinstance(problems, str)  # the permutation fact held
        contiguous, other = (load, store) if read_c else (store, load)
        best: tuple[int, Poly, tuple[int, ...]] | None = None
        for p in candidates:
            values = tuple(_value(p, pr.scalars) for pr in problems)
            if any(v is None or v <= 1 for v in values):
                continue
            spread = view.maps.deltas_along(contiguous, other, values)  # type: ignore[arg-type]
            if isinstance(spread, str) or not all(1 in d for d in spread):
                continue
            score = max(len(d) for d in spread)
            if best is None or score < best[0]:
                best = (score, p, values)  # type: ignore[assignment]
        if best is None:
            return NotApplicable("no size of the kernel is a step along which the other side is contiguous")
        return best[1], best[2]

    @staticmethod
    def _total(view: KernelView, store: Access, point: Node) -> tuple[str, tuple[int, ...]] | NotApplicable:
        """The spec's count of elements the flat index runs over (``[0, n)``), and its values."""
        span = view.maps.span(store.node, point)
        problems = view.maps.problems
        if isinstance(span, str) or isinstance(problems, str):
            return NotApplicable(f"the flat index has no range: {span}")
        if any(lo != 0 for lo, _ in span):
            return NotApplicable("the flat index does not start at 0")
        wanted = tuple(hi + 1 for _, hi in span)
        for a in view.subject.spec.args:
            if isinstance(a, ArraySpec):
                try:
                    got = tuple(int(evaluate(a.count, dict(pr.sizes))) for pr in problems)
                except (ValueError, TypeError):
                    continue
                if got == wanted:
                    return a.count, got
        return NotApplicable("the flat index's range is no array's element count")

    def accepts(self, params: Hashable) -> bool:
        return params in self.space

    def rewrite(self, match: FlatMatch, params: Hashable) -> Outcome:
        assert isinstance(params, tuple)
        t, r, pad = params
        view = match.view
        bound = view.launch_bounds
        if bound is not None:
            first = bound.named_children[0] if bound.named_children else None
            limit = view.poly(first) if first is not None else None
            if limit is None or set(limit) - {()} or t * r > limit.get((), 0):
                return NotApplicable(f"__launch_bounds__ allows fewer than {t * r} threads")
        if any(_cdiv(_cdiv(n, s), t) > _MAX_GRID_Y for n, s in zip(match.totals, match.steps, strict=True)):
            return NotApplicable(f"the grid of {t}-tiles would pass {_MAX_GRID_Y} blocks along y")
        e = Emitter(view)
        tile, j, a, b, g = (e.fresh(x) for x in ("tile", "j", "a", "b", "g"))
        elem = view.element_type(match.load.array)
        src, dst = view.text(match.load.node), view.text(match.store.node)

        def phase(loading: bool) -> str:
            along_a = loading == match.read_along_a  # this phase walks the contiguous side
            ia, ib = ("threadIdx.x", j) if along_a else (j, "threadIdx.x")
            copy = f"{tile}[{ib}][{ia}] = {src}" if loading else f"{dst} = {tile}[{ib}][{ia}]"

            def swap(n: Node) -> str | None:
                if n == match.point:
                    return f"{g}"
                if n == match.copy:
                    return copy
                if n.type == "return_statement":
                    return "continue;"
                return None

            element = e.substitute(view.body, swap).replace("\n", "\n" + PAD)
            return (
                f"for (int {j} = threadIdx.y; {j} < {t}; {j} += {r}) {{\n"
                f"{PAD}const long long {a} = (long long)blockIdx.x * {t} + {ia}, "
                f"{b} = (long long)blockIdx.y * {t} + {ib};\n"
                f"{PAD}if ({a} >= ({match.step})) continue;\n"
                f"{PAD}const long long {g} = {b} * ({match.step}) + {a};\n"
                f"{PAD}{element}\n"
                "}"
            )

        lines = [
            f"// cuda-agent: {t}x{t} shared-memory tile over the flat index "
            f"(idx = b * ({match.step}) + a), {t}x{r} threads per block",
            f"__shared__ {elem} {tile}[{t}][{t + pad}];",
            *phase(True).splitlines(),
            "__syncthreads();",
            *phase(False).splitlines(),
        ]
        e.replace(view.body, "{\n" + "".join(f"{PAD}{line}\n" for line in lines) + "}")
        s, n = match.step_spec, match.total_spec
        return e.rewrite(
            f"shared-memory tiled permute of a flat index ({t}x{t})",
            LaunchChange(grid=f"(cdiv({s}, {t}), cdiv(cdiv({n}, {s}), {t}))", block=f"({t}, {r})"),
        )


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _value(p: Poly, scalars: Mapping[str, int]) -> int | None:
    total = 0
    for m, c in p.items():
        term = c
        for atom in m:
            v = scalars.get(atom)
            if v is None:
                return None
            term *= v
        total += term
    return total


def _reached(view: KernelView, node: Node, depth: int = 0) -> list[Node]:
    """The nodes of ``node``'s expression and of the single-assignment locals it reads (their
    initializers, recursively)."""
    out = []
    for n in walk(node):
        out.append(n)
        if n.type == "identifier" and depth < 16:
            loc = view.declaration_of(n)
            if loc is not None and loc.value is not None and not loc.reassigned and not loc.pointer:
                out += _reached(view, loc.value, depth + 1)
    return out
