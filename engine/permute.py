"""Tiled affine permute: a one-element-per-thread copy ``out[P] = in[Q]`` whose read is contiguous
along one thread axis and whose write is contiguous along the other goes through a shared tile, so
that both are coalesced — batched (3-D) transposes, transposes of sub-matrices and strided views,
any layout whose indices are affine in the thread's 2-D position.

Matches (on the :class:`~engine.view.KernelView`) a kernel without loops, cooperation
or other memory accesses whose body is declarations, bounds checks and the one copy, where, in
canonical form (every local expanded), ``Q = Qx * gx + Qy * gy + Q0`` and ``P = Px * gx + Py *
gy + P0`` with ``gx``/``gy`` the 2-D global thread indices and the coefficients and rests the same
for the whole block (parameters, ``blockIdx.z``, macros), ``Qx = 1`` and ``Py = 1`` (or the
mirror); and the copy runs exactly where ``gx < X`` and ``gy < Y`` (from enclosing ``if``s or
earlier ``if (...) return;``, any spelling) plus conditions the same for the whole block, kept as
an early return (a plain 2-D transpose ``out[x * H + y] = in[y * W + x]`` too: the search
measures this rewrite beside the tiled transpose's).  Which element goes where is the index map itself: the rewrite performs the same
assignments (each ``(gx, gy)`` of the domain once), only in another order.

Rewrite (params ``(tile, rows)``): blocks of ``tile x rows`` threads on the grid of tiles
``(cdiv(X, tile), cdiv(Y, tile))`` (the spec's grid z kept); each block reads its tile along the
input's contiguous axis into ``__shared__ T tile[tile][tile + 1]`` and writes it along the output's.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from cudasrc.launch import LaunchChange
from cudasrc.specs import ScalarSpec
from engine.guards import facts_at, upper_bound
from engine.passes import PAD, Emitter, Match, NotApplicable, Outcome, Pass
from engine.view import (
    POSITION,
    KernelView,
    Poly,
    global_index,
    poly_add,
    poly_mul,
    poly_render,
    poly_uniform,
)

Node = tree_sitter.Node


@dataclass(frozen=True)
class PermuteMatch(Match):
    src: str
    dst: str
    read: tuple[Poly, Poly, Poly]  # Q = (coefficient of the contiguous-read axis, of the other, rest)
    write: tuple[Poly, Poly, Poly]  # P = (coefficient of the read axis, of the write axis, rest)
    extent: tuple[str, str]  # the bounds of the read axis and of the write axis (scalar parameters)
    uniform: tuple[Poly, ...]  # block-uniform conditions q >= 0 the copy also needs
    swapped: bool  # the read is contiguous along y (the write along x)
    atoms: tuple[tuple[str, str], ...]


def _affine(p: Poly) -> tuple[Poly, Poly, Poly] | None:
    """(coefficient of gx, of gy, rest) when ``p`` is affine in the 2-D global indices with
    block-uniform coefficients."""
    parts = []
    rest = dict(p)
    for axis in ("x", "y"):
        coeff: Poly = {}
        for m, c in p.items():
            if m.count(f"threadIdx.{axis}") == 1:
                mm = list(m)
                mm.remove(f"threadIdx.{axis}")
                coeff[tuple(mm)] = c
        if not poly_uniform(coeff):
            return None
        rest = poly_add(rest, poly_mul(coeff, global_index(axis)), -1)
        parts.append(coeff)
    if not poly_uniform(rest):
        return None
    return parts[0], parts[1], rest


class TiledPermute(Pass[PermuteMatch]):
    name = "TiledPermute"
    space = ((32, 8), (32, 16), (64, 16))

    def match(self, view: KernelView) -> PermuteMatch | NotApplicable:
        if view.loops or view.cooperation:
            return NotApplicable("the kernel has loops or threads that cooperate")
        writes = [a for a in view.accesses if a.written]
        reads = [a for a in view.accesses if not a.written]
        if len(writes) != 1 or len(reads) != 1 or writes[0].node.parent != reads[0].node.parent:
            return NotApplicable("the body is not one copy `out[...] = in[...];`")
        store, load = writes[0], reads[0]
        if store.array not in view.params or load.array not in view.params or store.array == load.array:
            return NotApplicable("the copy is not between two array parameters")
        if store.index is None or load.index is None:
            return NotApplicable("the copy's indices have no canonical form")
        q, p = _affine(load.index), _affine(store.index)
        if q is None or p is None:
            return NotApplicable("the indices are not affine in the thread's 2-D position")
        one = {(): 1}
        if q[0] == one and p[1] == one:
            swapped = False
        elif q[1] == one and p[0] == one:
            swapped = True
        else:
            return NotApplicable("the read and the write are not contiguous along different thread axes")
        expand = view.expander()
        gx, gy = global_index("x"), global_index("y")
        bounds: dict[str, str] = {}
        uniform: list[Poly] = []
        scalars = {a.name for a in view.subject.spec.args if isinstance(a, ScalarSpec)}
        for fact in facts_at(view, expand, store.node):
            if fact in (gx, gy):
                continue
            for axis, pos in (("x", gx), ("y", gy)):
                b = upper_bound(fact, pos)
                if b and b in scalars and b in view.params:
                    bounds.setdefault(axis, b)
                    break
            else:
                if not poly_uniform(fact):
                    return NotApplicable(
                        "a bounds check is neither `x < X`, `y < Y` nor the same for the block"
                    )
                uniform.append(fact)
        if set(bounds) != {"x", "y"}:
            return NotApplicable("the copy is not guarded by `x < X && y < Y` with scalar parameters")
        if swapped:
            q, p = (q[1], q[0], q[2]), (p[1], p[0], p[2])
            extent = (bounds["y"], bounds["x"])
        else:
            extent = (bounds["x"], bounds["y"])
        atoms = dict(expand.atoms)
        for a in (load, store):  # the atoms of the indices themselves
            ex = view.expander()
            idx = view._index_node(a.node)
            if idx is not None:
                ex.poly(idx)
            atoms.update(ex.atoms)
        return PermuteMatch(
            view, load.array, store.array, q, p, extent, tuple(uniform), swapped, tuple(atoms.items())
        )

    def rewrite(self, match: PermuteMatch, params: Hashable) -> Outcome:
        assert isinstance(params, tuple)
        t, r = params
        view = match.view
        scalars = {a.name: a.value for a in view.subject.spec.args if isinstance(a, ScalarSpec)}
        e = Emitter(view)
        tile, j, a, b = e.fresh("tile"), e.fresh("j"), e.fresh("a"), e.fresh("b")
        atoms = {**dict(match.atoms), "ca:a": a, "ca:b": b}
        elem = view.params[match.src].base_type
        na, nb = match.extent  # a: the read's contiguous axis, b: the write's

        def index(parts: tuple[Poly, Poly, Poly]) -> str:
            p = poly_add(
                poly_add(poly_mul(parts[0], {("ca:a",): 1}), poly_mul(parts[1], {("ca:b",): 1})), parts[2]
            )
            return poly_render(p, atoms, True)

        ba, bb = ("blockIdx.y", "blockIdx.x") if match.swapped else ("blockIdx.x", "blockIdx.y")
        body = [f"// cuda-agent: {t}x{t} shared-memory tile, {t}x{r} threads per block"]
        signed = {k: f"(long long){v}" if k.split(".")[0] in POSITION else v for k, v in atoms.items()}
        body += [
            f"if ({poly_render(u, signed, False)} < 0) return;" for u in match.uniform
        ]  # no unsigned wrap
        body += [
            f"__shared__ {elem} {tile}[{t}][{t + 1}];",
            "#pragma unroll",
            f"for (int {j} = 0; {j} < {t}; {j} += {r}) {{",
            f"{PAD}const int {a} = {ba} * {t} + threadIdx.x, {b} = {bb} * {t} + threadIdx.y + {j};",
            f"{PAD}if ({a} < {na} && {b} < {nb}) {tile}[threadIdx.y + {j}][threadIdx.x] = {match.src}[{index(match.read)}];",
            "}",
            "__syncthreads();",
            "#pragma unroll",
            f"for (int {j} = 0; {j} < {t}; {j} += {r}) {{",
            f"{PAD}const int {b} = {bb} * {t} + threadIdx.x, {a} = {ba} * {t} + threadIdx.y + {j};",
            f"{PAD}if ({a} < {na} && {b} < {nb}) {match.dst}[{index(match.write)}] = {tile}[threadIdx.x][threadIdx.y + {j}];",
            "}",
        ]
        e.replace(view.body, "{\n" + "".join(f"{PAD}{line}\n" for line in body) + "}")
        gx, gy = (nb, na) if match.swapped else (na, nb)
        dims = [f"cdiv({scalars[gx]}, {t})", f"cdiv({scalars[gy]}, {t})"]
        if len(view.subject.grid) == 3:
            dims.append(view.subject.grid[2])
        return e.rewrite(
            f"shared-memory tiled permute ({t}x{t})",
            LaunchChange(grid=f"({', '.join(dims)})", block=f"({t}, {r})"),
        )
