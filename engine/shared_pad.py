"""Shared-memory padding: a 1-D ``__shared__`` array whose threads touch elements an even number
apart gets a padding word after every 32 elements, so those strides spread over the banks.

Consecutive threads at ``temp[2 * tid]``, a work-efficient scan's ``temp[offset * (2 * tid + 1) -
1]`` or a flattened tile read down its columns ``tile[tx * 32 + ty]`` land on a few banks; GPU
Gems 3, ch. 39's ``CONFLICT_FREE_OFFSET`` spreads them.

Matches (on the :class:`~engine.view.KernelView`) a ``__shared__ T X[S]`` declared in the kernel
(one dimension, no initializer, ``T`` 4 bytes: one bank per element, ``S`` a constant) that the
kernel uses only as ``X[i]`` (never its address, never the array itself as a pointer), each index
free of assignments and calls and of ``X`` itself, where some index's coefficient of
``threadIdx.x`` (the loop variables and the locals assigned again as atoms) is even or not a
constant: consecutive threads a multiple of 2 elements apart share banks.

Rewrite (params ``"pad"``): ``X[S]`` becomes ``X[S + (S - 1) / 32]`` and every ``X[i]`` becomes
``X[i + (i >> 5)]``: an increasing map of the indices, so every element keeps one place of its
own and the kernel computes what it did, in the same order.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from cudasrc.dtypes import canonical_dtype, dtype_bytes
from engine.passes import Emitter, Match, NotApplicable, Outcome, Pass
from engine.view import KernelView, poly_split, unparenthesized, walk

Node = tree_sitter.Node
_SIMPLE = ("identifier", "number_literal")


@dataclass(frozen=True)
class Padded(Match):
    array: str
    size: Node  # the declarator's size expression
    uses: tuple[Node, ...]  # the subscripts ``X[i]``
    stride: str  # an index that strides the threads (C text, for the description)


class SharedPad(Pass[Padded]):
    name = "SharedPad"
    space = ("pad",)

    def match(self, view: KernelView) -> Padded | NotApplicable:
        why = "no 1-D __shared__ array of 4-byte elements"
        for decl in view.shared:
            for d in decl.children_by_field_name("declarator"):
                found = self._array(view, decl, d)
                if isinstance(found, Padded):
                    return found
                if found is not None:
                    why = found.reason
        return NotApplicable(why)

    @staticmethod
    def _array(view: KernelView, decl: Node, d: Node) -> Padded | NotApplicable | None:
        name, size = d.child_by_field_name("declarator"), d.child_by_field_name("size")
        if d.type != "array_declarator" or name is None or name.type != "identifier" or size is None:
            return None
        x = view.text(name)
        ty = decl.child_by_field_name("type")
        dtype = canonical_dtype(view.front.canonical(view.text(ty))) if ty is not None else None
        if dtype is None or dtype_bytes(dtype) != 4:
            return NotApplicable(f"`{x}`'s elements are not 4 bytes (one bank each)")
        if set(view.poly(size) or {(): 0}) != {()}:
            return NotApplicable(f"`{x}`'s size `{view.text(size)}` is not a constant")
        uses = []
        for n in view.nodes:
            if n.type != "identifier" or view.text(n) != x or n == name:
                continue
            sub = n.parent
            if sub is None or sub.type != "subscript_expression" or sub.child_by_field_name("argument") != n:
                return NotApplicable(f"`{x}` is used other than as `{x}[i]`")
            up = sub.parent
            if up is not None and up.type == "pointer_expression" and view.text(up.children[0]) == "&":
                return NotApplicable(f"the address of `{view.text(sub)}` is taken")
            idx = view._index_node(sub)
            if idx is None or any(
                m.type in ("assignment_expression", "update_expression", "call_expression")
                or (m.type == "identifier" and view.text(m) == x)
                for m in walk(idx)
            ):
                return NotApplicable(f"the index of `{view.text(sub)}` is not a plain expression")
            uses.append(sub)
        if not uses:
            return None
        free = frozenset(
            {lp.var for lp in view.loops if lp.var} | {v for v, loc in view.locals.items() if loc.reassigned}
        )
        expand = view.expander(free)
        for sub in uses:
            idx = view._index_node(sub)
            p = expand.poly(idx) if idx is not None else None
            coeff = poly_split(p, "threadIdx.x")[0] if p is not None else {}
            if coeff and (set(coeff) != {()} or coeff[()] % 2 == 0):
                return Padded(view, x, size, tuple(uses), view.text(sub))
        return NotApplicable(f"no index of `{x}` strides the threads an even number of elements apart")

    def rewrite(self, match: Padded, params: Hashable) -> Outcome:
        view = match.view
        e = Emitter(view)

        def term(n: Node) -> str:
            inner = unparenthesized(n) or n
            return view.text(inner) if inner.type in _SIMPLE else f"({view.text(inner)})"

        s = term(match.size)
        e.replace(match.size, f"{s} + ({s} - 1) / 32")
        for sub in match.uses:
            idx = view._index_node(sub)
            assert idx is not None
            i = term(idx)
            e.replace(idx, f"{i} + ({i} >> 5)")
        return e.rewrite(
            f"`{match.array}` padded a word every 32 elements (`{match.stride}` strides the banks)"
        )
