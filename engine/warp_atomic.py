"""One atomic per warp: every thread's ``atomicAdd`` into one address becomes a warp-shuffle sum
and one ``atomicAdd`` by the warp's first lane (:class:`WarpAtomic`).

Matches a statement ``atomicAdd(ADDR, v);`` of the kernel's body itself (not inside a loop or a
condition, no ``return`` in the kernel: every thread of every warp reaches it together) whose
address is the same for every thread of the block (``&out[0]``, ``out``, ``&sums[blockIdx.x]``)
and whose result is unused, in a 1-D block of a constant multiple of 32 threads (every warp is
whole, so the full-mask shuffles are defined)::

    atomicAdd(&out[0], x[i]);

becomes::

    {
        float v = x[i];
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (threadIdx.x % 32 == 0) atomicAdd(&out[0], v);
    }

``v`` has the type of the address's element, the type every addend took before.  The order of
the additions changes (a float sum differs in the last bits); 32 times fewer atomics contend for
the address.
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter

from engine import NotApplicable, Outcome, _constant_block
from engine.passes import Emitter, Match, Pass
from engine.view import KernelView

Node = tree_sitter.Node
_ADDABLE = ("float", "double", "int", "unsigned int", "unsigned long long")


@dataclass(frozen=True)
class AtomicSum(Match):
    statement: Node  # the ``atomicAdd(ADDR, v);`` statement
    address: Node
    value: Node
    elem: str  # the type of the address's element


class WarpAtomic(Pass[AtomicSum]):
    name = "WarpAtomic"
    space = ("warp",)

    def match(self, view: KernelView) -> AtomicSum | NotApplicable:
        threads = _constant_block(view.subject)
        if threads is None or threads % 32 or len(view.subject.block) != 1:
            return NotApplicable("the block is not a constant 1-D multiple of 32 threads")
        if view.returns:
            return NotApplicable("the kernel returns early: a warp may not reach the atomic together")
        why = "no `atomicAdd(ADDR, v);` of the kernel's body into one address"
        for call in view.atomics:
            fn, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
            if fn is None or args is None or view.text(fn) != "atomicAdd" or len(args.named_children) != 2:
                continue
            statement = call.parent
            if statement is None or statement.type != "expression_statement" or statement.parent != view.body:
                why = "the atomicAdd is inside a loop or a condition, or its value is used"
                continue
            address, value = args.named_children
            base = view.atomic_target(address, bare=True)
            if base is None or view.text(base) not in view.params or not view.uniform(address):
                why = f"`{view.text(address)}` is not one address for the whole block"
                continue
            elem = view.element_type(view.text(base))
            if elem not in _ADDABLE:
                why = f"`{view.text(base)}` holds `{elem}`, not a type this pass sums"
                continue
            return AtomicSum(view, statement, address, value, elem)
        return NotApplicable(why)

    def rewrite(self, match: AtomicSum, params: object) -> Outcome:
        view = match.view
        e = Emitter(view)
        v, o = e.fresh("v"), e.fresh("o")
        ind, u = e.indent(match.statement), e.unit(view.body, match.statement)
        e.replace(
            match.statement,
            "{  // cuda-agent: one atomic per warp, the warp's sum by shuffles\n"
            f"{ind}{u}{match.elem} {v} = {view.text(match.value)};\n"
            f"{ind}{u}#pragma unroll\n"
            f"{ind}{u}for (int {o} = 16; {o} > 0; {o} >>= 1) {v} += __shfl_down_sync(0xffffffffu, {v}, {o});\n"
            f"{ind}{u}if (threadIdx.x % 32 == 0) atomicAdd({view.text(match.address)}, {v});\n"
            f"{ind}}}",
        )
        return e.rewrite("warp-aggregated atomic (one atomicAdd per warp)")
