"""Block scan with warp shuffles: a Hillis-Steele inclusive scan over a block's shared array becomes
a scan within each warp by ``__shfl_up_sync``, the warps' totals scanned by the first warp.

Matches (on the :class:`~engine.view.KernelView`) on a constant 1-D block of ``B``
threads (a multiple of 32, at most 1024) a loop

    for (int s = 1; s < B; s <<= 1) {          // or s *= 2, s += s; bound blockDim.x or B
        T t = tid >= s ? X[tid - s] : 0;       // or if (tid >= s) t = X[tid - s]; (t declared anywhere)
        __syncthreads();
        X[tid] += t;                           // or X[tid] = X[tid] + t, under tid >= s or not
        __syncthreads();
    }

with ``X`` a ``__shared__`` array and ``tid`` the thread index: inside the loop ``X`` is written
only at ``[tid]`` by a sum and read only at ``[tid - s]`` (under a condition ``tid >= s``, any
spelling) or at ``[tid]``; the loop writes no other array.  After it, ``X[tid]`` holds the
inclusive sum of ``X[0..tid]`` as it was before the loop.

Rewrite (params: ``"shuffle"``): the loop becomes: ``v = X[tid]``; five ``__shfl_up_sync`` steps
scan each warp; the last lane of each warp stores the warp's total in ``__shared__ T
totals[32]``; the first warp scans the totals the same way; each thread adds the total of the
warps before it and stores ``X[tid] = v`` (a barrier after, as the loop ended with one).  The
order of the additions changes (floating-point sums may differ in the last bits).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from engine.passes import PAD, Emitter, Match, NotApplicable, Outcome, Pass
from engine.stencil import at_least_zero, conjuncts, constant_block
from engine.view import KernelView, Loop, poly_add, unparenthesized

Node = tree_sitter.Node
_DOUBLING = {("<<=", "1"), ("*=", "2")}


@dataclass(frozen=True)
class ScanMatch(Match):
    loop: Loop
    array: str  # the shared array X
    elem: str  # its element type
    tid: str  # the thread index as the loop writes it (C text)
    threads: int


class BlockScan(Pass[ScanMatch]):
    name = "BlockScan"
    space = ("shuffle",)

    def match(self, view: KernelView) -> ScanMatch | NotApplicable:
        block = constant_block(view)
        if block is None or len(block) != 1 or block[0] % 32 or block[0] > 1024:
            return NotApplicable("the block is not a constant 1-D multiple of 32 threads")
        threads = block[0]
        shared = self._shared(view)
        why = f"no Hillis-Steele scan loop `for (s = 1; s < {threads}; s <<= 1)` over a __shared__ array"
        for loop in view.loops:
            found = self._scan(view, loop, shared, threads)
            if isinstance(found, ScanMatch):
                return found
            if found is not None:
                why = found.reason
        return NotApplicable(why)

    @staticmethod
    def _shared(view: KernelView) -> dict[str, str]:
        """The block's ``__shared__`` arrays: name -> element type."""
        out = {}
        for d in view.shared:
            ty = d.child_by_field_name("type")
            for n in d.children_by_field_name("declarator"):
                if n.type == "array_declarator":
                    name = n.child_by_field_name("declarator")
                    if name is not None and ty is not None:
                        out[view.text(name)] = view.text(ty)
        return out

    def _scan(
        self, view: KernelView, loop: Loop, shared: dict[str, str], threads: int
    ) -> ScanMatch | NotApplicable | None:
        s = loop.var
        update = loop.node.child_by_field_name("update")
        if (
            not s
            or loop.start is None
            or view.text(loop.start) != "1"
            or update is None
            or loop.bound is None
        ):
            return None
        right = update.child_by_field_name("right")
        step = (view.text(update.children[1]), view.text(right)) if right is not None else ("", "")
        if step not in _DOUBLING and not (step[0] == "+=" and step[1] == s):
            return None
        bound = view.poly(loop.bound)
        if loop.op != "<" or bound not in ({("blockDim.x",): 1}, {(): threads}):
            return NotApplicable(f"the scan loop does not run while `{s} < blockDim.x`")
        inside = [a for a in view.accesses if loop.node.start_byte <= a.node.start_byte < loop.node.end_byte]
        free = frozenset({s})
        expand = view.expander(free)
        tid: dict[tuple[str, ...], int] = {("threadIdx.x",): 1}
        back = poly_add(tid, {(s,): 1}, -1)
        arrays = {a.array for a in inside if a.written}
        if len(arrays) != 1 or next(iter(arrays)) not in shared:
            return NotApplicable("the scan loop writes something other than one __shared__ array")
        x = arrays.pop()
        writes = [a for a in inside if a.written]
        if any(a.index != tid for a in writes) or any(not self._adds(view, a.node) for a in writes):
            return NotApplicable(f"the scan loop does not add into `{x}[tid]`")
        for a in inside:
            if a.array != x or a.written:
                continue
            if a.index == back:
                facts = [at_least_zero(expand, view, t) for t in conjuncts(view, a.node, loop.body)]
                if back not in facts:
                    return NotApplicable(f"`{view.text(a.node)}` is read without `tid >= {s}`")
            elif a.index != tid:
                return NotApplicable(f"`{view.text(a.node)}` is not read at `[tid - {s}]`")
        if not any(a.array == x and a.index == back for a in inside):
            return NotApplicable(f"the scan loop never reads `{x}[tid - {s}]`")
        idx = view._index_node(writes[0].node)
        assert idx is not None
        return ScanMatch(view, loop, x, shared[x], view.text(idx), threads)

    @staticmethod
    def _adds(view: KernelView, sub: Node) -> bool:
        """Whether the write ``sub`` is ``sub += e`` or ``sub = sub + e`` / ``e + sub``."""
        parent = sub.parent
        if parent is None or parent.type != "assignment_expression":
            return False
        op = view.text(parent.children[1])
        if op == "+=":
            return True
        right = unparenthesized(parent.child_by_field_name("right"))
        if (
            op != "="
            or right is None
            or right.type != "binary_expression"
            or view.text(right.children[1]) != "+"
        ):
            return False
        sides = (
            unparenthesized(right.child_by_field_name("left")),
            unparenthesized(right.child_by_field_name("right")),
        )
        return any(side is not None and view.tokens(side) == view.tokens(sub) for side in sides)

    def rewrite(self, match: ScanMatch, params: Hashable) -> Outcome:
        view = match.view
        e = Emitter(view)
        v, o, n, lane, warp, totals, w = (
            e.fresh("v"),
            e.fresh("o"),
            e.fresh("n"),
            e.fresh("lane"),
            e.fresh("warp"),
            e.fresh("totals"),
            e.fresh("w"),
        )
        t, x, tid, warps = match.elem, match.array, match.tid, match.threads // 32
        ind = e.indent(match.loop.node)
        lines = [
            "{  // cuda-agent: inclusive block scan with warp shuffles",
            f"{PAD}__shared__ {t} {totals}[32];",
            f"{PAD}const int {lane} = threadIdx.x % 32, {warp} = threadIdx.x / 32;",
            f"{PAD}{t} {v} = {x}[{tid}];",
            "#pragma unroll",
            f"{PAD}for (int {o} = 1; {o} < 32; {o} <<= 1) {{",
            f"{PAD}{PAD}const {t} {n} = __shfl_up_sync(0xffffffffu, {v}, {o});",
            f"{PAD}{PAD}if ({lane} >= {o}) {v} += {n};",
            f"{PAD}}}",
            f"{PAD}if ({lane} == 31) {totals}[{warp}] = {v};",
            f"{PAD}__syncthreads();",
            f"{PAD}if ({warp} == 0) {{",
            f"{PAD}{PAD}{t} {w} = {lane} < {warps} ? {totals}[{lane}] : ({t})0;",
            "#pragma unroll",
            f"{PAD}{PAD}for (int {o} = 1; {o} < 32; {o} <<= 1) {{",
            f"{PAD}{PAD}{PAD}const {t} {n} = __shfl_up_sync(0xffffffffu, {w}, {o});",
            f"{PAD}{PAD}{PAD}if ({lane} >= {o}) {w} += {n};",
            f"{PAD}{PAD}}}",
            f"{PAD}{PAD}if ({lane} < {warps}) {totals}[{lane}] = {w};",
            f"{PAD}}}",
            f"{PAD}__syncthreads();",
            f"{PAD}if ({warp} > 0) {v} += {totals}[{warp} - 1];",
            f"{PAD}{x}[{tid}] = {v};",
            f"{PAD}__syncthreads();",
            "}",
        ]
        e.replace(
            match.loop.node, lines[0] + "".join(f"\n{'' if s.startswith('#') else ind}{s}" for s in lines[1:])
        )
        return e.rewrite(f"inclusive block scan of {x} with warp shuffles ({match.threads} threads)")
