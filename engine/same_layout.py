"""Same-layout reduction: an interleaved-addressing shared-memory tree becomes sequential addressing.

Matches (on the :class:`~engine.view.KernelView`, by the pattern :data:`INTERLEAVED` of
:mod:`engine.patterns`) the loop of NVIDIA's first reduction kernel::

    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) X[tid] OP= X[tid + s];
        __syncthreads();
    }

with ``tid`` the thread index, ``X`` a ``__shared__`` array read after the loop only at ``X[0]``
(where the block's result lies, in both forms), and a constant power-of-two block of at least 64
threads.  The step may be any statement writing ``X[tid]`` from ``X[tid]`` and ``X[tid + s]``.

Rewrite: the same steps with sequential addressing (``s`` from ``blockDim.x / 2`` down, active
threads ``tid < s``: whole warps retire, no bank conflicts), a tree the warp-shuffle pass
(:class:`~engine.warp_reduction.WarpReduction`) matches: the search composes the two
(:mod:`engine.compose`), its last five steps then warp shuffles.  The order of the
additions changes, the layout of the partial results does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter

from engine import NotApplicable, Outcome, _constant_block
from engine.passes import Emitter, Match, Pass
from engine.patterns import ANY, BARRIER, Assign, Bin, Block, Captures, For, If, Lit, Poly, Var
from engine.view import KernelView, Loop

Node = tree_sitter.Node
_THREAD: dict[tuple[str, ...], int] = {("threadIdx.x",): 1}
# for (s = 1; s < blockDim.x; s *= 2) { if (tid % (2 * s) == 0) STEP; BARRIER; }
INTERLEAVED = For(
    "s",
    start=Poly({(): 1}),
    cond=Bin("<", Var("s"), Lit("blockDim.x")),
    update=Assign("*=", Var("s"), Poly({(): 2})) | Assign("<<=", Var("s"), Poly({(): 1})),
    body=Block(
        If(
            Bin("==", Bin("%", Poly(_THREAD, free=("s",)), Poly({("$s",): 2}, free=("s",))), Poly({})),
            then=Block(ANY @ "step"),
        ),
        BARRIER,
    ),
)


@dataclass(frozen=True)
class TreeMatch(Match):
    loop: Loop
    tid: str  # the thread index as the step writes it
    step: Node  # the statement of one step


class SameLayoutReduction(Pass[TreeMatch]):
    name = "SameLayoutReduction"
    space = ("sequential",)

    def match(self, view: KernelView) -> TreeMatch | NotApplicable:
        threads = _constant_block(view.subject)
        if threads is None or threads < 64 or threads & (threads - 1) or len(view.subject.block) != 1:
            return NotApplicable("the block is not a constant 1-D power of two of at least 64 threads")
        shared = {
            view.text(n)
            for d in view.shared
            for n in d.children_by_field_name("declarator")
            if n.type == "array_declarator"
            for n in [n.child_by_field_name("declarator") or n]
        }
        for loop in view.loops:
            caps = INTERLEAVED.match(view, loop.node, {})
            found = self._tree(view, caps, shared) if caps is not None else None
            if found is not None:
                return found
        return NotApplicable(
            "no `for (s = 1; s < blockDim.x; s *= 2) { if (tid % (2 * s) == 0) X[tid] += X[tid + s]; "
            "__syncthreads(); }` over a __shared__ array"
        )

    @staticmethod
    def _tree(view: KernelView, caps: Captures, shared: set[str]) -> TreeMatch | None:
        """The step writes ``X[tid]`` of a ``__shared__`` array from ``X[tid]`` and ``X[tid + s]``,
        and only ``X[0]`` is read after the loop."""
        loop, step, s = caps["loop"], caps["step"], caps["s"]
        inside = [a for a in view.accesses if step.start_byte <= a.node.start_byte < step.end_byte]
        writes = [a for a in inside if a.written]
        if len(writes) != 1 or writes[0].array not in shared or writes[0].index != _THREAD:
            return None
        x = writes[0].array
        far = {**_THREAD, (s,): 1}
        if any(a.array == x and a.index not in (_THREAD, far) for a in inside):
            return None
        if not any(a.array == x and a.index == far for a in inside):
            return None
        after = [a for a in view.accesses if a.array == x and a.node.start_byte >= loop.node.end_byte]
        if any(a.index != {} for a in after):
            return None
        index = writes[0].node.child_by_field_name("indices")
        assert index is not None and index.named_child_count == 1
        return TreeMatch(view, loop, view.text(index.named_children[0]), step)

    def rewrite(self, match: TreeMatch, params: object) -> Outcome:
        view = match.view
        e = Emitter(view)
        loop = match.loop
        init = loop.node.child_by_field_name("initializer")
        assert init is not None
        kind = view.text(init.child_by_field_name("type") or init)
        s, tid, ind = loop.var, match.tid, e.indent(loop.node)
        e.replace(
            loop.node,
            f"// cuda-agent: sequential addressing: active threads are contiguous, whole warps retire\n"
            f"{ind}for ({kind} {s} = blockDim.x / 2; {s} > 0; {s} >>= 1) {{\n"
            f"{ind}    if ({tid} < {s}) {{\n"
            f"{ind}        {view.text(match.step)}\n"
            f"{ind}    }}\n"
            f"{ind}    __syncthreads();\n"
            f"{ind}}}",
        )
        return e.rewrite("sequential-addressing tree reduction")
