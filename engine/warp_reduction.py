"""A shared-memory tree reduction's last steps as warp shuffles (:class:`WarpReduction`).

Matched on the view by a pattern (:data:`TREE`, :mod:`engine.patterns`), in any
spelling of the tree::

    for (s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) X[tid] OP= X[tid + s]; BARRIER; }

``s >>= 1``, ``s /= 2``, ``s = s / 2`` or ``s = s >> 1``; ``tid`` any form of ``threadIdx.x``;
``tid + s`` in either order; the barrier in any spelling the view knows (``__syncthreads()``,
``cg::sync(cta)``, ``cta.sync()``); the loop variable declared by the loop or before it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import ClassVar

import tree_sitter

from engine import NotApplicable, Outcome
from engine.passes import Emitter, Match, Parameterized
from engine.patterns import (
    ANY,
    BARRIER,
    Assign,
    Bin,
    Block,
    Captures,
    For,
    If,
    Poly,
    Stmt,
    Var,
)
from engine.view import KernelView, Loop

Node = tree_sitter.Node
_TID: dict[tuple[str, ...], int] = {("threadIdx.x",): 1}


@dataclass(frozen=True)
class Tree(Match):
    loop: Loop
    tid: Node  # the guard's thread index expression
    step: Node  # the statement the guard runs
    near: frozenset[int]  # ids of the subscripts X[tid]
    far: frozenset[int]  # ids of the subscripts X[tid + s]
    array: str  # X as written


# `s >>= 1`, `s /= 2`, `s = s >> 1`, `s = s / 2`
HALVES = (
    Assign(">>=", Var("s"), Poly({(): 1}))
    | Assign("/=", Var("s"), Poly({(): 2}))
    | Assign("=", Var("s"), Bin(">>", Var("s"), Poly({(): 1})))
    | Assign("=", Var("s"), Bin("/", Var("s"), Poly({(): 2})))
)
# for (s = START; s > 0; HALVES) { if (tid < s) STEP; BARRIER; }
TREE = For(
    "s",
    cond=Bin(">", Var("s"), Poly({})),
    update=HALVES,
    body=Block(
        If(Bin("<", Poly(_TID, free=("s",)) @ "tid", Var("s")), then=Block(Stmt(ANY) @ "step")),
        BARRIER,
    ),
)


def _tree(view: KernelView, caps: Captures) -> Tree | None:
    """The step's accesses: ``X[tid]`` and ``X[tid + s]`` of one array, nothing else."""
    lp, step = caps["loop"], caps["step"]
    inside = [a for a in view.accesses if step.start_byte <= a.node.start_byte < step.end_byte]
    near = {a.node.id for a in inside if a.index == _TID}
    far = {a.node.id for a in inside if a.index == {**_TID, (lp.var,): 1}}
    arrays = {a.via for a in inside}
    if not near or not far or len(arrays) != 1 or len(near) + len(far) != len(inside):
        return None
    return Tree(view, lp, caps["tid"], step, frozenset(near), frozenset(far), arrays.pop())


@dataclass(frozen=True)
class WarpReduction(Parameterized[Tree]):
    """A shared-memory tree reduction's last steps (``s <= 32``) as warp shuffles, without barriers
    (see the module docstring)."""

    name: ClassVar[str] = "WarpReduction"
    leads: ClassVar[bool] = False

    def match(self, view: KernelView) -> Tree | NotApplicable:
        for lp in view.loops:
            caps = TREE.match(view, lp.node, {})
            found = _tree(view, caps) if caps is not None else None
            if found is not None:
                return found
        return NotApplicable(
            "no `for (s = ...; s > 0; s >>= 1) { if (tid < s) X[tid] += X[tid + s]; __syncthreads(); }`"
        )

    def rewrite(self, match: Tree, params: Hashable) -> Outcome:
        view, lp = match.view, match.loop
        em = Emitter(view)
        v, o = em.fresh("v"), em.fresh("o")
        x, tid = match.array, view.text(match.tid)
        cond = lp.node.child_by_field_name("condition")
        assert cond is not None and lp.start is not None
        tree_loop = em.substitute(lp.node, lambda n: f"{lp.var} > 32" if n == cond else None)

        def step(far: str) -> str:
            return em.substitute(
                match.step, lambda n: v if n.id in match.near else (far if n.id in match.far else None)
            )

        ind = em.indent(lp.node)
        em.replace(
            lp.node,
            f"{tree_loop}\n"
            f"{ind}if ({tid} < 32) {{  // cuda-agent: the last warp reduces with shuffles, no barriers\n"
            f"{ind}    auto {v} = {x}[{tid}];\n"
            f"{ind}    if (({view.text(lp.start)}) >= 32) {step(f'{x}[{tid} + 32]')}\n"
            f"{ind}    #pragma unroll\n"
            f"{ind}    for (int {o} = 16; {o} > 0; {o} >>= 1) {step(f'__shfl_down_sync(0xffffffffu, {v}, {o})')}\n"
            f"{ind}    if ({tid} == 0) {x}[0] = {v};\n"
            f"{ind}}}\n"
            f"{ind}__syncthreads();",
        )
        return em.rewrite("warp-shuffle reduction (last 5 steps)")


WarpReduction.space = (WarpReduction(),)
