"""Looped tiled transpose: a block of ``T x R`` threads copying a ``T x T`` tile, each thread
looping over the tile's rows ``for (j = 0; j < T; j += R) dst[P] = src[Q];`` (NVIDIA's
``transposeNaive``, ``odata[index_out + i] = idata[index_in + i * width]``) — or a square block
copying one element per thread (``R = T``, no loop) — goes through a padded shared tile, so that
both the reads and the writes are coalesced, with the launch unchanged.

Rule (facts of the view's access maps, :mod:`engine.maps`, so the indices' spelling —
macros, ``gridDim.x * TILE_DIM`` widths, offsets built before the loop — does not matter): the
threads do not cooperate; the body is declarations that read no array, then one loop, the last
statement, ``for (int j = 0; j < T; j += R)`` with ``T`` and ``R`` constants equal to the block's
constant ``(T, R)``, without early returns (or: no loop, a constant square block, any guards and
early returns); inside it the only memory accesses are one copy between two array
parameters; at every problem of the spec the copy is a permutation, both sides depend on
``threadIdx.y`` and ``j`` only through ``threadIdx.y + j`` (the element is a point ``(a, b) =
(threadIdx.x, threadIdx.y + j)`` of the block's tile), and one side is contiguous along
``threadIdx.x`` while the other is not.

Rewrite (param: the tile's padding, 1 or 0): the launch is kept.  The thread first runs the
kernel's own statements with the copy replaced by a load into ``__shared__ T tile[T][T + pad]``
at its points ``(a, b)`` (at the transposed points ``(b, a)`` when the write is the contiguous
side), then, after a barrier, the same statements at the other points with the copy replaced by
the store from the tile: each element of the tile is copied once, by the same statement, the
side that is strided in the original now walked along ``threadIdx.x``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from engine import constant_dims
from engine.maps import Permutation
from engine.passes import PAD, Emitter, Match, NotApplicable, Outcome, Pass
from engine.view import POSITION, Access, KernelView, Loop, statements

Node = tree_sitter.Node


@dataclass(frozen=True)
class LoopedMatch(Match):
    loop: Loop | None  # the loop over the tile's rows (None: one element per thread, R = T)
    tile: int  # T
    rows: int  # R
    copy: Node  # the assignment ``dst[P] = src[Q]``
    load: Access
    store: Access
    read_first: bool  # the read is contiguous along threadIdx.x at the thread's own points


class LoopedTranspose(Pass[LoopedMatch]):
    name = "LoopedTranspose"
    space = (1, 0)  # the tile's padding (1: no bank conflicts on the transposed walk)

    def match(self, view: KernelView) -> LoopedMatch | NotApplicable:
        if what := view.cooperation:
            return NotApplicable(f"the kernel already uses {what}")
        block = constant_dims(view.subject.block)
        if block is None or len(block) != 2:
            return NotApplicable("the block is not a constant 2-D block")
        loop: Loop | None = None
        if not view.loops:  # one element per thread of a square block
            if block[0] != block[1]:
                return NotApplicable(f"the block {block[0]} x {block[1]} is not a square tile")
            tile, rows = block
        else:
            found = self._rows(view, block)
            if isinstance(found, NotApplicable):
                return found
            loop, tile, rows = found
        writes = [a for a in view.accesses if a.written]
        reads = [a for a in view.accesses if not a.written]
        if len(writes) != 1 or len(reads) != 1:
            return NotApplicable("the loop's body is not one copy `out[...] = in[...];`")
        store, load = writes[0], reads[0]
        copy = store.node.parent
        right = copy.child_by_field_name("right") if copy is not None else None
        while right is not None and right.type == "parenthesized_expression":
            right = right.named_children[0]
        if (
            copy is None
            or copy.type != "assignment_expression"
            or view.text(copy.children[1]) != "="
            or right != load.node
        ):
            return NotApplicable("the loop's body is not one copy `out[...] = in[...];`")
        if store.array not in view.params or load.array not in view.params or store.array == load.array:
            return NotApplicable("the copy is not between two array parameters")
        maps = view.maps
        perm = maps.permutation(store, load)
        if not isinstance(perm, Permutation):
            return NotApplicable(f"the copy is not a permutation: {perm}")
        if loop is not None and not (maps.through(load, loop) and maps.through(store, loop)):
            return NotApplicable("the copy depends on threadIdx.y and the loop other than through their sum")
        read_c, write_c = maps.contiguous(load, warp=True), maps.contiguous(store, warp=True)
        if read_c == write_c:
            return NotApplicable(
                "both sides are contiguous along threadIdx.x already"
                if read_c
                else "neither side is contiguous"
            )
        return LoopedMatch(view, loop, tile, rows, copy, load, store, read_c)

    @staticmethod
    def _rows(view: KernelView, block: tuple[int, ...]) -> tuple[Loop, int, int] | NotApplicable:
        """The loop over the tile's rows: declarations that read no array, then
        ``for (j = 0; j < T; j += R)`` with ``(T, R)`` the block, the last statement."""
        body = statements(view.body)
        if len(view.loops) != 1 or not body or body[-1] != view.loops[0].node:
            return NotApplicable("the body is not declarations and then one loop over the tile's rows")
        loop = view.loops[0]
        if any(a.loop is None for a in view.accesses) or any(s.type != "declaration" for s in body[:-1]):
            return NotApplicable("a statement before the loop is not a declaration that reads no array")
        if view.returns:
            return NotApplicable("the loop returns early")
        start = view.poly(loop.start) if loop.start is not None else None
        bound = view.poly(loop.bound) if loop.bound is not None else None
        if start != {} or loop.op != "<" or bound is None or set(bound) - {()}:
            return NotApplicable("the loop is not `for (j = 0; j < T; j += R)`")
        tile, rows = bound.get((), 0), block[1]
        if block[0] != tile or view.maps.loop_step(loop) != rows or tile % rows:
            return NotApplicable(
                f"the loop does not walk a {block[0]} x {block[0]} tile in steps of the block's rows"
            )
        return loop, tile, rows

    def rewrite(self, match: LoopedMatch, params: Hashable) -> Outcome:
        assert isinstance(params, int)
        view, loop = match.view, match.loop
        e = Emitter(view)
        tile, j = e.fresh("tile"), e.fresh("j")
        elem = view.element_type(match.load.array)
        src, dst = view.text(match.load.node), view.text(match.store.node)
        row = f"threadIdx.y + {loop.var}" if loop is not None else "threadIdx.y"
        moved = f"threadIdx.y + {j}" if loop is not None else "threadIdx.y"

        def own(loading: bool) -> str:
            """The kernel's statements at the thread's points, the copy replaced."""
            slot = f"{tile}[{row}][threadIdx.x]"
            copy = f"{slot} = {src}" if loading else f"{dst} = {slot}"

            def keep(n: Node) -> str | None:
                if n == match.copy:
                    return copy
                return "break;" if n.type == "return_statement" else None

            text = e.substitute(view.body, keep)
            return text if loop is not None else f"do {text} while (0);"

        def swapped(loading: bool) -> str:
            """The kernel's statements at the transposed points ``(threadIdx.y + j, threadIdx.x)``."""
            slot = f"{tile}[threadIdx.x][{moved}]"

            def swap(n: Node) -> str | None:
                if n == match.copy:
                    if loading:
                        return f"{slot} = {e.substitute(match.load.node, swap)}"
                    return f"{e.substitute(match.store.node, swap)} = {slot}"
                if (
                    n.type == "field_expression"
                    and view.text(n.child_by_field_name("argument") or n) in POSITION
                ):
                    flat = view.text(n).replace(" ", "")
                    return {"threadIdx.x": f"({moved})", "threadIdx.y": "threadIdx.x"}.get(flat)
                if loop is not None and n.type == "identifier" and view.text(n) == loop.var:
                    return "0" if loop.body.start_byte <= n.start_byte else None
                return "break;" if n.type == "return_statement" else None

            if loop is None:
                return f"do {e.substitute(view.body, swap)} while (0);"
            parts = [e.substitute(s, swap) for s in (*statements(view.body)[:-1], loop.body)]
            inner = "\n".join(f"{PAD}{p}" for p in parts)
            return f"{{\n#pragma unroll\nfor (int {j} = 0; {j} < {match.tile}; {j} += {match.rows}) {{\n{inner}\n}}\n}}"

        first = own(True) if match.read_first else swapped(True)
        second = swapped(False) if match.read_first else own(False)
        lines = [
            f"// cuda-agent: {match.tile}x{match.tile} shared-memory tile, each side walked along threadIdx.x",
            f"__shared__ {elem} {tile}[{match.tile}][{match.tile + params}];",
            *first.splitlines(),
            "__syncthreads();",
            *second.splitlines(),
        ]
        e.replace(view.body, "{\n" + "".join(f"{PAD}{line}\n" for line in lines) + "}")
        return e.rewrite(f"shared-memory tiled transpose of the block's tile ({match.tile}x{match.tile})")
