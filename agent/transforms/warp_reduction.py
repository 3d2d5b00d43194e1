"""A shared-memory tree reduction's last steps as warp shuffles (:class:`WarpReduction`).

Matched on the view, in any spelling of the tree::

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

from agent.transforms import NotApplicable, Outcome
from agent.transforms.passes import Emitter, Match, Parameterized
from agent.transforms.view import KernelView, Loop, statements, unparenthesized

Node = tree_sitter.Node
_TID = {("threadIdx.x",): 1}


@dataclass(frozen=True)
class Tree(Match):
    loop: Loop
    tid: Node  # the guard's thread index expression
    step: Node  # the statement the guard runs
    near: frozenset[int]  # ids of the subscripts X[tid]
    far: frozenset[int]  # ids of the subscripts X[tid + s]
    array: str  # X as written


def _halves(view: KernelView, lp: Loop) -> bool:
    """Whether the loop's update halves its variable."""
    u = unparenthesized(lp.node.child_by_field_name("update"))
    if u is None or u.type != "assignment_expression":
        return False
    left, right, op = (u.child_by_field_name(f) for f in ("left", "right", "operator"))
    if left is None or right is None or op is None or view.text(left) != lp.var:
        return False
    o, r = view.text(op), unparenthesized(right)
    if o in (">>=", "/=") and r is not None:
        return view.poly(r) == {(): 1 if o == ">>=" else 2}
    if o == "=" and r is not None and r.type == "binary_expression":
        a, b, ro = (
            r.child_by_field_name("left"),
            r.child_by_field_name("right"),
            r.child_by_field_name("operator"),
        )
        if a is None or b is None or ro is None or view.text(unparenthesized(a) or a) != lp.var:
            return False
        return (view.text(ro), view.poly(b)) in ((">>", {(): 1}), ("/", {(): 2}))
    return False


def _tree(view: KernelView, lp: Loop) -> Tree | None:
    if not lp.var or lp.op != ">" or lp.bound is None or view.poly(lp.bound) != {} or lp.start is None:
        return None
    if not _halves(view, lp):
        return None
    body = statements(lp.body)
    if len(body) != 2 or not view.block_barrier(body[1]):
        return None
    guard = body[0]
    if guard.type != "if_statement" or guard.child_by_field_name("alternative") is not None:
        return None
    clause = guard.child_by_field_name("condition")
    cond = unparenthesized(clause.child_by_field_name("value") if clause is not None else None)
    if cond is None or cond.type != "binary_expression":
        return None
    left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    op = view.text(cond.children[1])
    if left is None or right is None:
        return None
    if op == ">":
        left, right = right, left
    elif op != "<":
        return None
    free = frozenset({lp.var})
    if view.text(right) != lp.var or view.poly(left, free) != _TID:
        return None
    conseq = guard.child_by_field_name("consequence")
    steps = statements(conseq) if conseq is not None else []
    if len(steps) != 1 or steps[0].type != "expression_statement":
        return None
    step = steps[0]
    inside = [a for a in view.accesses if step.start_byte <= a.node.start_byte < step.end_byte]
    near = {a.node.id for a in inside if a.index == _TID}
    far = {a.node.id for a in inside if a.index == {**_TID, (lp.var,): 1}}
    arrays = {a.via for a in inside}
    if not near or not far or len(arrays) != 1 or len(near) + len(far) != len(inside):
        return None
    return Tree(view, lp, left, step, frozenset(near), frozenset(far), arrays.pop())


@dataclass(frozen=True)
class WarpReduction(Parameterized[Tree]):
    """A shared-memory tree reduction's last steps (``s <= 32``) as warp shuffles, without barriers
    (see the module docstring)."""

    name: ClassVar[str] = "WarpReduction"
    leads: ClassVar[bool] = False

    def match(self, view: KernelView) -> Tree | NotApplicable:
        for lp in view.loops:
            found = _tree(view, lp)
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
