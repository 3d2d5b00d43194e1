"""Tiled dot product: a thread-per-output kernel whose one loop accumulates ``acc += A[f(i, k)] *
B[g(k, j)]`` becomes an expert's SGEMM: shared-memory K tiles and register blocking.

Match (on the :class:`~engine.view.KernelView`):

* the kernel's one loop runs ``k`` from 0 to a uniform bound by 1 and its body is one
  ``acc += X[...] * Y[...]`` (or ``acc = acc + ...``; ``acc`` a float, double or integer local,
  the only variable the loop carries) over two pointer parameters of one element type that
  nothing writes: float, double or an integer type (an integer ``acc`` only over integer loads:
  a sum of integers is exact in any order, one of float products truncates at each step); the
  tiles, registers and zero fills take the loads' type and the sums the accumulator's;
* the two index expressions (canonical polynomials of the view, aliases resolved) are affine in
  the loop variable and in one of the global indices ``gx = blockIdx.x * blockDim.x +
  threadIdx.x`` / ``gy`` each, X in one (its rows ``i``), Y in the other (its columns ``j``);
  whatever else they hold is uniform (parameters, ``blockIdx.z`` batch offsets): any layout;
* guards before the loop (``if (i < M && j < N) {...}`` or early ``return``) bound ``i`` and ``j``
  by scalar parameters of the spec; no shared memory, barriers, atomics, shuffles, other loops,
  other thread positions, or writes through pointers; 2-D blocks, a grid whose z is kept.

Rewrite (params :class:`Tile`): blocks of ``(BM / TM) * (BN / TN)`` threads, each block a ``BM`` x
``BN`` tile of outputs (``blockIdx.y``: tiles of ``i``, ``blockIdx.x``: tiles of ``j``, the
columns along the outputs' contiguous index; ``blockIdx.z`` kept), each thread ``TM`` x ``TN`` of
them in registers.  K tiles of ``BK`` go through two shared buffers, both stored ``[k][i or j]``
(X's transposed) and padded by 4 elements: the next tile is loaded into registers while the
current one is multiplied (one barrier per tile).  A block whose tile lies inside the bounds and
whose rows are 16-byte aligned loads whole K tiles with float4 (float2) vectors and no bounds
checks; the other blocks, and the last partial K tile, load element by element with checks.  The
inner loop is a fully unrolled outer product from float4 shared loads; each thread's rows and
columns come in groups of 4 strided over the tile (conflict-free shared reads).  Then the sums
leave through a shared stage, one row of each thread's per step, so that consecutive threads take
consecutive columns (``Tile.staged``; without it each thread takes its own outputs), and the
original body runs once per output, with the global indices replaced by the output's coordinates,
the loop by ``acc += <tile sum>`` and ``return`` by ``continue``: initial values (bias), epilogues
(``alpha * acc + beta * C[...]``), masks and their ``-INFINITY`` writes are kept as written.  An
early return before the loop whose condition compares the two global indices (a causal mask
``if (j > i) {...; return;}``) skips the K loop for a block whose whole tile it covers.
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter

from cudasrc.dtypes import canonical_dtype, dtype_bytes
from cudasrc.launch import LaunchChange
from cudasrc.specs import InvalidSpec, ScalarSpec, bench_sizes, evaluate
from engine import NotApplicable, Outcome, _block_names
from engine.guards import launch_covers
from engine.passes import Emitter, Match, Pass
from engine.view import (
    KernelView,
    Loop,
    Poly,
    global_index,
    poly_add,
    poly_mul,
    poly_render,
    poly_split,
    poly_uniform,
    statements,
    unparenthesized,
)

Node = tree_sitter.Node
SMS = 132  # streaming multiprocessors of the GPUs the guess is made for (H100, H200)
SHARED_LIMIT = 48 * 1024  # static shared memory per block
_COMPARE = ("<", "<=", ">", ">=")


@dataclass(frozen=True)
class Tile:
    """``bm`` x ``bn`` outputs per block, ``bk``-deep K tiles, ``tm`` x ``tn`` outputs per thread."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    staged: bool = True  # outputs leave through shared memory, consecutive threads on consecutive columns

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    def __str__(self) -> str:
        return f"{self.bm}x{self.bn}x{self.bk}, {self.tm}x{self.tn} per thread{'' if self.staged else ', direct stores'}"


@dataclass(frozen=True)
class Operand:
    """One load of the product: ``array[coeff * o + k_coeff * k + rest]`` for the output
    coordinate ``o`` it walks (global index ``axis``) and the loop variable ``k``."""

    array: str
    axis: str  # "x" or "y"
    coeff: Poly
    k_coeff: Poly
    rest: Poly
    wide: bool  # the index is computed in 64 bits

    def index(self, outer: str, k: str) -> str:
        """The index at the output coordinate ``outer`` and ``k`` (C text; "0" drops a term)."""
        p = self.rest
        for coeff, atom, text in ((self.coeff, "@o", outer), (self.k_coeff, "@k", k)):
            if text != "0":
                p = poly_add(p, poly_mul(coeff, {(atom,): 1}))
        return poly_render(p, {"@o": outer, "@k": k}, self.wide)

    @property
    def contiguous(self) -> str | None:
        """The axis its consecutive elements run along: ``"k"``, ``"outer"`` or None."""
        return "k" if self.k_coeff == {(): 1} else "outer" if self.coeff == {(): 1} else None


@dataclass(frozen=True)
class Mask:
    """An early-exit condition ``cx * gx + cy * gy + rest OP 0`` before the loop."""

    op: str
    cx: Poly
    cy: Poly
    rest: Poly


@dataclass(frozen=True)
class DotMatch(Match):
    loop: Loop
    acc: str
    acc_type: str
    elem: str
    a: Operand  # walks the block's rows (blockIdx.y)
    b: Operand  # walks the block's columns (blockIdx.x), the outputs' contiguous axis
    m_bound: Poly
    n_bound: Poly
    k_bound: Poly
    extents: tuple[str, str, str]  # M, N and the grid's z in the spec's vocabulary ("" : no z)
    masks: tuple[Mask, ...]
    sizes: tuple[int, int, int, int]  # M, N, the grid's z and K at the benchmark size (0: unknown)
    covered: tuple[str, ...] = ()  # the axes no guard bounds (the launch covered them exactly)


SPACE = (
    Tile(128, 128, 8, 8, 8),
    Tile(128, 128, 16, 8, 8),
    Tile(128, 64, 8, 8, 4),
    Tile(128, 64, 16, 8, 4),
    Tile(64, 64, 8, 4, 4),
    Tile(64, 64, 16, 4, 4),
    Tile(128, 128, 8, 8, 8, staged=False),
)
# relative speed of each tile shape's threads (more outputs per thread and per block: fewer loads
# per FMA), calibrated on the H200 from a 2048^3 SGEMM (128x128: 33.8, 128x64: 28.5, 64x64: 24.4
# TFLOP/s, 1, 2 and 3 waves); the guess weighs it against the waves of blocks a problem takes
_SHAPE_SPEED = {(128, 128): 1.0, (128, 64): 0.84, (64, 64): 0.55}
_RESIDENT = {(128, 128): 2, (128, 64): 2, (64, 64): 3}  # blocks of 256 threads per SM (registers)


class TiledDot(Pass[DotMatch]):
    name = "TiledDot"
    space = SPACE

    def guess(self, match: DotMatch) -> Tile:
        """The shape with the shortest expected time at the benchmark size: the waves of blocks
        it takes (blocks over the SMs' resident slots) times each block's time (outputs per
        thread over the shape's speed).  Large problems get 128x128 tiles; problems whose big
        tiles leave SMs idle get smaller ones."""
        m, n, z, _ = match.sizes
        if not (m and n):
            return SPACE[0]

        def time(t: Tile) -> float:
            blocks = -(-m // t.bm) * -(-n // t.bn) * max(z, 1)
            waves = -(-blocks // (SMS * _RESIDENT[(t.bm, t.bn)]))
            return waves * t.tm * t.tn / _SHAPE_SPEED[(t.bm, t.bn)]

        return min((t for t in SPACE if t.bk == 8 and t.staged), key=time)

    # ------------------------------------------------------------------------------- match

    def match(self, view: KernelView) -> DotMatch | NotApplicable:
        subject = view.subject
        if view.body.has_error:
            return NotApplicable("the kernel does not parse cleanly")
        if what := view.cooperation:
            return NotApplicable(f"the kernel already uses {what}: its threads cooperate")
        if len(subject.block) == 3 and subject.block[2].strip() != "1":
            return NotApplicable("the block has a z dimension")
        if len(view.loops) != 1 or any(
            n.type in ("while_statement", "do_statement", "switch_statement", "goto_statement")
            for n in view.nodes
        ):
            return NotApplicable("the kernel is not one loop over k")
        loop = view.loops[0]
        head = view.text(loop.node).split(")")[0] + ")"
        start = view.poly(loop.start) if loop.start is not None else None
        if not loop.var or start != {} or loop.op != "<" or loop.step != 1 or loop.bound is None:
            return NotApplicable(f"`{head}` is not `for (k = 0; k < K; ++k)`")
        k_bound = view.poly(loop.bound)
        if k_bound is None or not poly_uniform(k_bound):
            return NotApplicable(f"the bound of `{head}` is not uniform")
        found = self._product(view, loop)
        if isinstance(found, NotApplicable):
            return found
        acc, operands = found
        a, b = operands
        if a.axis == b.axis:
            return NotApplicable(
                "both loads walk the same global index (not a dot product of rows and columns)"
            )
        if _store_axis(view) == a.axis:
            a, b = b, a  # the threads' columns (b) follow the outputs' contiguous axis
        for n in view.nodes:
            if n.type == "pointer_expression" and n.children[0].type == "*" and _assigned(n):
                return NotApplicable("the kernel writes through a pointer")
        for acc_ in view.accesses:
            if acc_.written and acc_.array in (a.array, b.array):
                return NotApplicable(f"the kernel writes {acc_.array}, which the loop reads")
        elem = view.element_type(a.array)
        if view.element_type(b.array) != elem or _kind(elem) is None:
            return NotApplicable("the loads are not of one float, double or integer type")
        local = view.locals.get(acc)
        acc_type = view.element_type(acc) if local is not None else ""
        if local is None and acc.endswith("]"):  # `C[i * N + j] += ...`: an element of a parameter
            acc_type = view.element_type(acc.split("[")[0].strip())
        if _kind(acc_type) is None or (_kind(acc_type) == "integer" and _kind(elem) != "integer"):
            # an integer sum of float products truncates at each step: its order matters
            return NotApplicable(
                f"the accumulator `{acc}` is not a float, double or (over integer loads) integer local"
            )
        bounds = _bounds(view, loop)
        covered = []
        for axis in ("x", "y"):  # no guard: the launch covers exactly a parameter's extent
            if axis not in bounds and (cover := _exact_cover(view, axis, b.axis)) is not None:
                bounds[axis] = cover
                covered.append(axis)
        if "x" not in bounds or "y" not in bounds:
            return NotApplicable(
                "no guard bounds both global indices (`if (i < M && j < N)`) and the launch covers no "
                "parameter's extent exactly"
            )
        grid = _grid(view, bounds[a.axis], bounds[b.axis], k_bound)
        if isinstance(grid, NotApplicable):
            return grid
        extents, sizes = grid
        refused = _outputs_only(view)
        if refused is not None:
            return refused
        return DotMatch(
            view,
            loop,
            acc,
            acc_type,
            elem,
            a,
            b,
            bounds[a.axis],
            bounds[b.axis],
            k_bound,
            extents,
            _masks(view, loop),
            sizes,
            tuple(covered),
        )

    def _product(self, view: KernelView, loop: Loop) -> tuple[str, tuple[Operand, Operand]] | NotApplicable:
        """The accumulator and the two loads of ``acc += X[..] * Y[..]`` (``acc`` a local, or an
        element ``C[..]`` of a pointer parameter that nothing else reads or writes)."""
        body = statements(loop.body)
        while len(body) == 1 and body[0].type == "compound_statement":
            body = statements(body[0])
        one = len(body) == 1 and body[0].type == "expression_statement" and body[0].named_child_count == 1
        expr = body[0].named_children[0] if one else None
        sums = [c for c in loop.carried if c.reduction is not None and c.reduction.kind == "sum"]
        into = _element_sum(view, loop, expr) if expr is not None and not loop.carried else None
        if into is None and (
            expr is None or expr.type != "assignment_expression" or len(loop.carried) != 1 or len(sums) != 1
        ):
            return NotApplicable("the loop body is not one `acc += A[..] * B[..];`")
        assert expr is not None
        acc = into if into is not None else sums[0].name
        op = view.text(expr.children[1])
        term = unparenthesized(expr.child_by_field_name("right"))
        if op == "=" and term is not None and term.type == "binary_expression":
            left, right = (unparenthesized(term.child_by_field_name(f)) for f in ("left", "right"))
            term = right if left is not None and view.text(left) == acc else left
            term = unparenthesized(term)
        elif op != "+=":
            return NotApplicable("the loop body is not an accumulation into one variable")
        if term is None or term.type != "binary_expression" or view.text(term.children[1]) != "*":
            return NotApplicable("the accumulated term is not a product of two loads")
        by_node = {x.node.id: x for x in view.accesses}
        operands: list[Operand] = []
        for side in (term.child_by_field_name("left"), term.child_by_field_name("right")):
            side = unparenthesized(side)
            access = by_node.get(side.id) if side is not None else None
            if access is None or access.array not in view.params or view.params[access.array].pointer != 1:
                return NotApplicable(
                    "the accumulated term is not a product of two loads from pointer parameters"
                )
            if access.index is None:
                return NotApplicable(f"the index of {access.via} is not affine")
            k_coeff, rest = poly_split(access.index, loop.var)
            if not k_coeff or not poly_uniform(k_coeff) or any(loop.var in m for m in k_coeff):
                return NotApplicable(f"{access.via} is not indexed by the loop variable")
            walked = _axis_of(rest)
            if walked is None:
                return NotApplicable(f"{access.via} does not walk one global thread index")
            axis, coeff, uniform = walked
            if any(x.startswith("blockDim") for m in uniform for x in m):
                return NotApplicable(f"the index of {access.via} uses blockDim")
            operands.append(
                Operand(access.array, axis, coeff, k_coeff, uniform, _wide(view, access.node, access.via))
            )
        return acc, (operands[0], operands[1])

    # ------------------------------------------------------------------------------- rewrite

    def rewrite(self, match: DotMatch, params: object) -> Outcome:
        assert isinstance(params, Tile)
        t = params
        nt = t.threads
        if t.bm % t.tm or t.bn % t.tn or (t.bm * t.bk) % nt or (t.bn * t.bk) % nt or nt > 1024 or nt % 32:
            return NotApplicable(
                f"tile {t.bm}x{t.bn}x{t.bk} with {t.tm}x{t.tn} per thread does not divide into warps"
            )
        size = dtype_bytes(canonical_dtype(match.elem) or "")
        stage = (
            (t.bm // t.tm) * (t.bn + 4) * dtype_bytes(canonical_dtype(match.acc_type) or "")
            if t.staged
            else 0
        )
        if 2 * t.bk * (t.bm + t.bn + 8) * size + stage > SHARED_LIMIT:
            return NotApplicable(f"tile {t} needs more than 48 KiB of shared memory")
        view = match.view
        e = Emitter(view)
        body = _Body(match, t, e).text()
        e.replace(view.body, body)
        name = view.subject.doc.tree.root_node.named_descendant_for_byte_range(
            view.kernel.name_span.start_byte, view.kernel.name_span.end_byte
        )
        assert name is not None
        bounds = f"__launch_bounds__({nt}, 2)"  # 2 blocks per SM: at most 128 registers
        if view.launch_bounds is not None:  # the kernel's own, for the block it was written for
            e.replace(view.launch_bounds, bounds)
        else:
            e.insert_before(name, f"{bounds} ")
        m_spec, n_spec, z = match.extents
        grid = ", ".join((f"cdiv({n_spec}, {t.bn})", f"cdiv({m_spec}, {t.bm})", *((z,) if z else ())))
        launch = LaunchChange(grid=f"({grid})", block=str(nt))
        return e.rewrite(f"shared-memory tiled dot product ({t})", launch)


class _Body:
    """The rewritten kernel body for one tile shape (names from the emitter)."""

    def __init__(self, match: DotMatch, tile: Tile, e: Emitter) -> None:
        self.m, self.t, self.e = match, tile, e
        tiles = ("As", "Bs", "tx", "ty", "m0", "n0", "acc", "k0", "buf", "kk")
        self.n = {s: e.fresh(s) for s in (*tiles, "i", "j", "s", "l", "x", "r", "c")}
        self.n.update({"ga": e.fresh(f"g{match.a.axis}"), "gb": e.fresh(f"g{match.b.axis}")})
        self.n.update({s: e.fresh(s) for s in ("fast_a", "fast_b", "ra", "rb", "a", "b", "v", "masked")})
        self.bound = {
            "m": poly_render(match.m_bound, {}, False),
            "n": poly_render(match.n_bound, {}, False),
            "k": poly_render(match.k_bound, {}, False),
        }

    # the loads of one operand -------------------------------------------------------------

    def _width(self, op: Operand, extent: int) -> int:
        """Elements per vector load: 4 or 2 floats along the contiguous axis, else 1."""
        t, along = self.t, op.contiguous
        per_thread = extent * t.bk // t.threads
        span = t.bk if along == "k" else extent
        ok = self.m.elem == "float" and along is not None
        return next((w for w in (4, 2) if ok and per_thread % w == 0 and span % w == 0), 1)

    def _slot(self, op: Operand, extent: int, v: int) -> tuple[str, str]:
        """(offset along the tile, offset along k) of the vector ``l`` a thread loads."""
        n, along = self.n, op.contiguous
        if along == "k":
            return f"{n['l']} / {self.t.bk // v}", f"({n['l']} % {self.t.bk // v}) * {v}"
        return f"({n['l']} % {extent // v}) * {v}", f"{n['l']} / {extent // v}"

    def load(
        self, op: Operand, regs: str, fast: str, origin: str, extent: int, bound: str, pad: str
    ) -> list[str]:
        """``op``'s K tile at ``k0`` into the registers ``regs``: vectors without checks when the
        block's ``fast`` flag holds and the tile is whole, elements with checks otherwise."""
        n, t, elem = self.n, self.t, self.m.elem
        v = self._width(op, extent)
        count = extent * t.bk // (v * t.threads)
        k_bound = self.bound["k"]
        head = [
            "#pragma unroll",
            f"for (int {n['s']} = 0; {n['s']} < {count}; ++{n['s']}) {{",
            f"    const int {n['l']} = threadIdx.x + {n['s']} * {t.threads};",
            f"    const int {n['r']} = {origin} + {self._slot(op, extent, v)[0]}, {n['c']} = {n['k0']} + {self._slot(op, extent, v)[1]};",
        ]
        if v == 1:
            fast_body = [f"    {regs}[{n['s']}] = {op.array}[{op.index(n['r'], n['c'])}];"]
            slow_body = [
                f"    {regs}[{n['s']}] = {n['r']} < {bound} && {n['c']} < {k_bound} ? {op.array}[{op.index(n['r'], n['c'])}] : {_zero(elem)};"
            ]
        else:
            vec = f"float{v}"
            fast_body = [
                f"    {regs}[{n['s']}] = *reinterpret_cast<const {vec}*>({op.array} + ({op.index(n['r'], n['c'])}));"
            ]
            slow_body = []
            for q, comp in enumerate("xyzw"[:v]):
                step = f" + {q}" if q else ""
                r, c = (n["r"], f"{n['c']}{step}") if op.contiguous == "k" else (f"{n['r']}{step}", n["c"])
                slow_body.append(
                    f"    {regs}[{n['s']}].{comp} = {r} < {bound} && {c} < {k_bound} ? {op.array}[{op.index(_wrap(r), _wrap(c))}] : {_zero(elem)};"
                )
        out = [
            f"if ({fast} && {n['k0']} + {t.bk} <= {k_bound}) {{",
            *("    " + line for line in head + fast_body + ["}"]),
            "} else {",
            *("    " + line for line in head + slow_body + ["}"]),
            "}",
        ]
        return [pad + line for line in out]

    def store(self, op: Operand, regs: str, tile: str, extent: int, pad: str) -> list[str]:
        """The registers of ``load`` into the shared buffer ``tile[buf]`` (``[k][extent]``)."""
        n, t = self.n, self.t
        v = self._width(op, extent)
        count = extent * t.bk // (v * t.threads)
        x, kk = self._slot(op, extent, v)
        out = [
            "#pragma unroll",
            f"for (int {n['s']} = 0; {n['s']} < {count}; ++{n['s']}) {{",
            f"    const int {n['l']} = threadIdx.x + {n['s']} * {t.threads};",
            f"    const int {n['x']} = {x}, {n['kk']} = {kk};",
        ]
        if v == 1:
            out.append(f"    {tile}[{n['buf']}][{n['kk']}][{n['x']}] = {regs}[{n['s']}];")
        elif op.contiguous == "outer":
            out.append(
                f"    *reinterpret_cast<float{v}*>(&{tile}[{n['buf']}][{n['kk']}][{n['x']}]) = {regs}[{n['s']}];"
            )
        else:
            for q, comp in enumerate("xyzw"[:v]):
                row = f"{n['kk']} + {q}" if q else n["kk"]
                out.append(f"    {tile}[{n['buf']}][{row}][{n['x']}] = {regs}[{n['s']}].{comp};")
        out.append("}")
        return [pad + line for line in out]

    def aligned(self, op: Operand, origin: str, extent: int) -> str:
        """The run-time check that every vector ``load`` reads is aligned (the index is affine:
        two addresses decide it), or ``true`` for element loads."""
        v = self._width(op, extent)
        if v == 1:
            return ""
        second = op.index(f"({origin} + 1)", "0") if op.contiguous == "k" else op.index(origin, "1")
        return (
            f" && ((reinterpret_cast<size_t>({op.array} + ({op.index(origin, '0')})) |"
            f" reinterpret_cast<size_t>({op.array} + ({second}))) % {4 * v} == 0)"
        )

    # the compute --------------------------------------------------------------------------

    def coord(self, base: str, thread: str, reg: str, per: int, threads: int) -> str:
        if per % 4 == 0:
            return f"{base} + ({reg} / 4) * {4 * threads} + {thread} * 4 + {reg} % 4"
        return f"{base} + {thread} * {per} + {reg}"

    def fragment(self, reg: str, tile: str, thread: str, per: int, threads: int) -> list[str]:
        n, elem = self.n, self.m.elem
        if per % 4 or elem != "float":
            return [
                "#pragma unroll",
                f"for (int {n['s']} = 0; {n['s']} < {per}; ++{n['s']}) {reg}[{n['s']}] = {tile}[{n['buf']}][{n['kk']}][{self.coord('0', thread, n['s'], per, threads)}];",
            ]
        out = []
        for g in range(per // 4):
            part = self.e.fresh(f"{reg.removeprefix('ca_')}{g}")
            src = f"*reinterpret_cast<const float4*>(&{tile}[{n['buf']}][{n['kk']}][{g * 4 * threads} + {thread} * 4])"
            out.append(f"const float4 {part} = {src};")
            out.append(" ".join(f"{reg}[{4 * g + q}] = {part}.{c};" for q, c in enumerate("xyzw")))
        return out

    def mask(self, mask: Mask) -> str:
        """``mask`` holds on the whole tile: at its extreme corner (constant coefficients) or at
        all four corners."""
        n, t = self.n, self.t
        ranges = {
            self.m.a.axis: (n["m0"], f"{n['m0']} + {t.bm - 1}"),
            self.m.b.axis: (n["n0"], f"{n['n0']} + {t.bn - 1}"),
        }
        lowest = mask.op in (">", ">=")  # the condition must hold where the expression is least
        choices = []
        for axis, coeff in (("x", mask.cx), ("y", mask.cy)):
            lo, hi = ranges[axis]
            if set(coeff) == {()}:
                choices.append([lo if (coeff[()] > 0) == lowest else hi])
            else:
                choices.append([lo, hi])
        tests = []
        for gx in choices[0]:
            for gy in choices[1]:
                p = poly_add(
                    poly_add(poly_mul(mask.cx, {("@x",): 1}), poly_mul(mask.cy, {("@y",): 1})), mask.rest
                )
                tests.append(f"{poly_render(p, {'@x': f'({gx})', '@y': f'({gy})'}, False)} {mask.op} 0")
        return " && ".join(tests)

    def text(self) -> str:
        m, t, n = self.m, self.t, self.n
        elem, acc_t = m.elem, m.acc_type
        tx_n = t.bn // t.tn
        pad_a, pad_b = t.bm + 4, t.bn + 4
        va, vb = self._width(m.a, t.bm), self._width(m.b, t.bn)
        rtype_a = f"float{va}" if va > 1 else elem
        rtype_b = f"float{vb}" if vb > 1 else elem
        count_a = t.bm * t.bk // (va * t.threads)
        count_b = t.bn * t.bk // (vb * t.threads)
        k_bound = self.bound["k"]
        lines = [
            "{",
            f"    // cuda-agent: {t.bm}x{t.bn} outputs per block through {t.bk}-deep shared tiles (two buffers), {t.tm}x{t.tn} per thread",
            f"    __shared__ __align__(16) {elem} {n['As']}[2][{t.bk}][{pad_a}];  // {m.a.array} tile, transposed",
            f"    __shared__ __align__(16) {elem} {n['Bs']}[2][{t.bk}][{pad_b}];  // {m.b.array} tile",
            f"    const int {n['tx']} = threadIdx.x % {tx_n}, {n['ty']} = threadIdx.x / {tx_n};",
            f"    const int {n['m0']} = blockIdx.y * {t.bm}, {n['n0']} = blockIdx.x * {t.bn};",
            f"    {acc_t} {n['acc']}[{t.tm}][{t.tn}];",
            "    #pragma unroll",
            f"    for (int {n['i']} = 0; {n['i']} < {t.tm}; ++{n['i']})",
            "        #pragma unroll",
            f"        for (int {n['j']} = 0; {n['j']} < {t.tn}; ++{n['j']}) {n['acc']}[{n['i']}][{n['j']}] = 0;",
        ]
        pad = "    "
        if m.masks:
            tests = " || ".join(f"({self.mask(k)})" for k in m.masks)
            lines.append("    // a tile that every output leaves before the loop (a mask) skips it")
            lines.append(f"    const bool {n['masked']} = {tests};")
            lines.append(f"    if (!{n['masked']}) {{")
            pad = "        "
        body = [
            "// whole tiles of aligned rows load as vectors without bounds checks",
            f"const bool {n['fast_a']} = {n['m0']} + {t.bm} <= {self.bound['m']}{self.aligned(m.a, n['m0'], t.bm)};",
            f"const bool {n['fast_b']} = {n['n0']} + {t.bn} <= {self.bound['n']}{self.aligned(m.b, n['n0'], t.bn)};",
            f"{rtype_a} {n['ra']}[{count_a}];  // the next K tile, staged in registers",
            f"{rtype_b} {n['rb']}[{count_b}];",
            f"int {n['buf']} = 0;",
            f"int {n['k0']} = 0;",
        ]
        lines += [pad + line for line in body]
        lines += self.load(m.a, n["ra"], n["fast_a"], n["m0"], t.bm, self.bound["m"], pad)
        lines += self.load(m.b, n["rb"], n["fast_b"], n["n0"], t.bn, self.bound["n"], pad)
        lines.append(f"{pad}for (; {n['k0']} < {k_bound}; {n['buf']} ^= 1) {{")
        inner = pad + "    "
        lines += self.store(m.a, n["ra"], n["As"], t.bm, inner)
        lines += self.store(m.b, n["rb"], n["Bs"], t.bn, inner)
        lines += [
            f"{inner}__syncthreads();  // the other buffer is free: every thread is past its products",
            f"{inner}{n['k0']} += {t.bk};",
            f"{inner}if ({n['k0']} < {k_bound}) {{",
        ]
        lines += self.load(m.a, n["ra"], n["fast_a"], n["m0"], t.bm, self.bound["m"], inner + "    ")
        lines += self.load(m.b, n["rb"], n["fast_b"], n["n0"], t.bn, self.bound["n"], inner + "    ")
        compute = [
            "}",
            "#pragma unroll",
            f"for (int {n['kk']} = 0; {n['kk']} < {t.bk}; ++{n['kk']}) {{",
            f"    {elem} {n['a']}[{t.tm}], {n['b']}[{t.tn}];",
            *("    " + x for x in self.fragment(n["a"], n["As"], n["ty"], t.tm, t.bm // t.tm)),
            *("    " + x for x in self.fragment(n["b"], n["Bs"], n["tx"], t.tn, tx_n)),
            "    #pragma unroll",
            f"    for (int {n['i']} = 0; {n['i']} < {t.tm}; ++{n['i']})",
            "        #pragma unroll",
            f"        for (int {n['j']} = 0; {n['j']} < {t.tn}; ++{n['j']}) {n['acc']}[{n['i']}][{n['j']}] += {n['a']}[{n['i']}] * {n['b']}[{n['j']}];",
            "}",
        ]
        lines += [inner + x for x in compute]
        lines.append(f"{pad}}}")
        if m.masks:
            lines.append("    }")
        lines += self.staged_outputs() if t.staged else self.direct_outputs()
        lines.append("}")
        return "\n".join(lines)

    def per_output(self, tile_sum: str) -> list[str]:
        m, n = self.m, self.n
        text = _per_output(m, f"{m.acc} += {tile_sum};", {m.a.axis: n["ga"], m.b.axis: n["gb"]})
        names = {m.a.axis: (n["ga"], self.bound["m"]), m.b.axis: (n["gb"], self.bound["n"])}
        checks = [f"{names[axis][0]} >= {names[axis][1]}" for axis in ("y", "x") if axis in m.covered]
        guard = [f"if ({' || '.join(checks)}) continue;  // past the extent the original's launch covered"]
        return [
            "            " + line if line.strip() else ""
            for line in (guard if checks else []) + _dedent(text)
        ]

    def direct_outputs(self) -> list[str]:
        """Each thread runs the original body for its own outputs."""
        t, n = self.t, self.n
        return [
            "    // each output as the original computed it, from its tile sum",
            "    #pragma unroll",
            f"    for (int {n['i']} = 0; {n['i']} < {t.tm}; ++{n['i']}) {{",
            "        #pragma unroll",
            f"        for (int {n['j']} = 0; {n['j']} < {t.tn}; ++{n['j']}) {{",
            f"            const int {n['ga']} = {self.coord(n['m0'], n['ty'], n['i'], t.tm, t.bm // t.tm)};",
            f"            const int {n['gb']} = {self.coord(n['n0'], n['tx'], n['j'], t.tn, t.bn // t.tn)};",
            *self.per_output(f"{n['acc']}[{n['i']}][{n['j']}]"),
            "        }",
            "    }",
        ]

    def staged_outputs(self) -> list[str]:
        """Row ``i`` of every thread's outputs goes to shared memory, then the threads run the
        original body over that stage with consecutive threads on consecutive columns (coalesced
        loads and stores in the epilogue)."""
        m, t, n = self.m, self.t, self.n
        rows, tx_n = t.bm // t.tm, t.bn // t.tn
        stage, o = self.e.fresh("Cs"), self.e.fresh("o")
        writes = [
            "        #pragma unroll",
            f"        for (int {n['j']} = 0; {n['j']} < {t.tn}; ++{n['j']})",
            f"            {stage}[{n['ty']}][{self.coord('0', n['tx'], n['j'], t.tn, tx_n)}] = {n['acc']}[{n['i']}][{n['j']}];",
        ]
        if m.acc_type == "float" and t.tn % 4 == 0:
            writes = [
                f"        *reinterpret_cast<float4*>(&{stage}[{n['ty']}][{g * 4 * tx_n} + {n['tx']} * 4]) = float4{{"
                + ", ".join(f"{n['acc']}[{n['i']}][{4 * g + q}]" for q in range(4))
                + "};"
                for g in range(t.tn // 4)
            ]
        row = f"{o} / {t.bn}"
        return [
            f"    // the outputs leave through shared memory, one row of each thread's {t.tm} per step, so that",
            "    // consecutive threads run the original body on consecutive columns",
            f"    __shared__ __align__(16) {m.acc_type} {stage}[{rows}][{t.bn + 4}];",
            "    #pragma unroll",
            f"    for (int {n['i']} = 0; {n['i']} < {t.tm}; ++{n['i']}) {{",
            "        __syncthreads();  // the stage is free",
            *writes,
            "        __syncthreads();",
            f"        for (int {o} = threadIdx.x; {o} < {rows * t.bn}; {o} += {t.threads}) {{",
            f"            const int {n['ga']} = {self.coord(n['m0'], f'({row})', n['i'], t.tm, rows)};",
            f"            const int {n['gb']} = {n['n0']} + {o} % {t.bn};",
            *self.per_output(f"{stage}[{row}][{o} % {t.bn}]"),
            "        }",
            "    }",
        ]


# ----------------------------------------------------------------------------------- helpers


def _kind(elem: str) -> str | None:
    """ "float" (float, double), "integer" (char ... long long, signed or not) or None (half,
    bfloat16, vector types, bool: the tiles do not take them) for a canonical element type."""
    dtype = canonical_dtype(elem)
    if dtype in ("float32", "float64"):
        return "float"
    return "integer" if dtype in _INTEGERS else None


_INTEGERS = frozenset(f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64))


def _zero(elem: str) -> str:
    """A zero of the element type ``elem`` as a literal of that type (the fill of a load past the bounds)."""
    return {"float32": "0.0f", "float64": "0.0"}.get(canonical_dtype(elem) or "", "0")


def _wrap(text: str) -> str:
    return text if text.replace("_", "").isalnum() else f"({text})"


def _dedent(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    indents = [len(x) - len(x.lstrip()) for x in lines if x.strip()]
    cut = min(indents, default=0)
    return [x[cut:] for x in lines]


def _assigned(n: Node) -> bool:
    p = n.parent
    return p is not None and (
        (p.type == "assignment_expression" and p.child_by_field_name("left") == n)
        or p.type == "update_expression"
    )


def _axis_of(p: Poly) -> tuple[str, Poly, Poly] | None:
    """p = coeff * g_axis + rest (coeff nonzero and uniform, rest uniform) for one axis, or None."""
    for axis in ("x", "y"):
        coeff, _ = poly_split(p, f"threadIdx.{axis}")
        if coeff and poly_uniform(coeff):
            rest = poly_add(p, poly_mul(coeff, global_index(axis)), -1)
            if poly_uniform(rest):
                return axis, coeff, rest
    return None


def _wide(view: KernelView, node: Node, via: str) -> bool:
    """Whether the index of the load ``node`` (or the offset of the alias ``via`` it goes through)
    is computed in 64 bits (a cast to ``size_t``/``long``...)."""
    ex = view.expander()
    index = KernelView._index_node(node)
    if index is not None:
        ex.poly(index)
    local = view.locals.get(via)
    if local is not None and local.value is not None:
        ex.poly(local.value)
    return ex.wide


def _store_axis(view: KernelView) -> str:
    """The global index along which the kernel's stores are contiguous ("x" unless a store says y)."""
    for a in view.accesses:
        if a.written and a.index is not None and poly_split(a.index, "threadIdx.y")[0] == {(): 1}:
            return "y"
    return "x"


def _split_global(p: Poly) -> tuple[Poly, Poly, Poly] | None:
    """p = cx * gx + cy * gy + rest with every part uniform, or None."""
    rest = p
    coeffs = []
    for axis in ("x", "y"):
        coeff, _ = poly_split(rest, f"threadIdx.{axis}")
        if coeff == {(): 0} or not poly_uniform(coeff):
            return None
        rest = poly_add(rest, poly_mul(coeff, global_index(axis)), -1)
        coeffs.append(coeff)
    return (coeffs[0], coeffs[1], rest) if poly_uniform(rest) else None


def _comparisons(view: KernelView, cond: Node, joint: str) -> list[tuple[Poly, str]]:
    """The ``L op R`` parts of ``cond`` joined by ``joint`` (``&&`` or ``||``) as ``(L - R, op)``."""
    n = unparenthesized(cond)
    if n is None or n.type != "binary_expression":
        return []
    op = view.text(n.children[1])
    left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
    if left is None or right is None:
        return []
    if op == joint:
        return _comparisons(view, left, joint) + _comparisons(view, right, joint)
    if op not in _COMPARE:
        return []
    lp, rp = view.poly(left), view.poly(right)
    if lp is None or rp is None:
        return []
    return [(poly_add(lp, rp, -1), op)]


_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _early_exits(view: KernelView, loop: Loop) -> list[Node]:
    """The conditions of top-level ``if (c) ... return;`` statements before the loop."""
    out = []
    for s in statements(view.body):
        if s.start_byte >= loop.node.start_byte:
            break
        conseq = s.child_by_field_name("consequence") if s.type == "if_statement" else None
        clause = s.child_by_field_name("condition")
        if conseq is None or clause is None or s.child_by_field_name("alternative") is not None:
            continue
        last = statements(conseq)[-1] if statements(conseq) else None
        value = clause.child_by_field_name("value")
        if last is not None and last.type == "return_statement" and value is not None:
            out.append(value)
    return out


def _bounds(view: KernelView, loop: Loop) -> dict[str, Poly]:
    """Uniform upper bounds of the global indices from the guards the loop runs under: the
    conditions of enclosing ``if``s (``&&`` of ``g < B``) and early ``if (g >= B || ...) return;``."""
    found: list[tuple[Poly, str]] = []
    for value in _enclosing_guards(view, loop):
        found += _comparisons(view, value, "&&")
    for value in _early_exits(view, loop):
        found += [(d, _NEGATE[op]) for d, op in _comparisons(view, value, "||")]
    out: dict[str, Poly] = {}
    for diff, op in found:  # diff op 0 holds where the loop runs
        for axis in ("x", "y"):
            g = global_index(axis)
            for sign, rel in ((1, op), (-1, {"<": ">", ">": "<", "<=": ">=", ">=": "<="}[op])):
                bound = poly_add(g, poly_mul({(): sign}, diff), -1)  # g - sign * diff
                if rel == "<" and poly_uniform(bound):  # sign * diff = g - bound < 0
                    out[axis] = bound
    for diff, op in found:  # a triangle: gx <= gy < B bounds gx by B too (and the other way)
        parts = _split_global(diff)
        if parts is None or parts[2] or op not in _NEGATE:
            continue
        cx, cy, _ = parts
        if op in (">", ">="):
            cx, cy = poly_mul(cx, {(): -1}), poly_mul(cy, {(): -1})
        for a, b, ca, cb in (("x", "y", cx, cy), ("y", "x", cy, cx)):
            if ca == {(): 1} and cb == {(): -1} and b in out and a not in out:
                out[a] = out[b]
    return out


def _enclosing_guards(view: KernelView, loop: Loop) -> list[Node]:
    """The conditions of the ``if``\\ s (without ``else``) the loop runs inside."""
    out = []
    for n in view.nodes:
        if n.type != "if_statement" or n.child_by_field_name("alternative") is not None:
            continue
        conseq, clause = n.child_by_field_name("consequence"), n.child_by_field_name("condition")
        value = clause.child_by_field_name("value") if clause is not None else None
        if (
            conseq is not None
            and value is not None
            and conseq.start_byte <= loop.node.start_byte < conseq.end_byte
        ):
            out.append(value)
    return out


def _masks(view: KernelView, loop: Loop) -> tuple[Mask, ...]:
    """The conditions that compare the two global indices (causal masks), as the condition on
    which an output leaves: early exits before the loop, and the negated conjuncts of the guards
    the loop runs under (``if (i < T && j <= i)``)."""
    found = [c for value in _early_exits(view, loop) for c in _comparisons(view, value, "||")]
    for value in _enclosing_guards(view, loop):
        found += [(diff, _NEGATE[op]) for diff, op in _comparisons(view, value, "&&")]
    out = []
    for diff, op in found:
        parts = _split_global(diff)
        if parts is not None and parts[0] and parts[1]:
            out.append(Mask(op, *parts))
    return tuple(out)


def _grid(
    view: KernelView, m_bound: Poly, n_bound: Poly, k_bound: Poly
) -> tuple[tuple[str, str, str], tuple[int, int, int, int]] | NotApplicable:
    """M, N and the grid's z in the spec's vocabulary, and M, N, z and K at the benchmark size
    (0: unknown)."""
    subject = view.subject
    values = {a.name: a.value for a in subject.spec.args if isinstance(a, ScalarSpec)}
    spec_atoms = {
        atom: f"({values[atom]})"
        for b in (m_bound, n_bound, k_bound)
        for m in b
        for atom in m
        if atom in values
    }
    for bound in (m_bound, n_bound):
        for atom in (atom for mono in bound for atom in mono if atom not in values):
            return NotApplicable(f"the bound {atom} is not a scalar parameter of the spec")
    m_spec, n_spec, k_spec = (poly_render(b, spec_atoms, False) for b in (m_bound, n_bound, k_bound))
    z = subject.grid[2] if len(subject.grid) == 3 else ""
    if _block_names(z or "1"):
        return NotApplicable("the grid's z dimension depends on the block")
    sizes = []
    for x in (m_spec, n_spec, z, k_spec):
        try:
            sizes.append(int(evaluate(x, dict(bench_sizes(subject.spec)))) if x else 1)
        except (InvalidSpec, ValueError, TypeError):
            sizes.append(0)
    return (m_spec, n_spec, z), (sizes[0], sizes[1], sizes[2], sizes[3])


def _outputs_only(view: KernelView) -> NotApplicable | None:
    """Refuses thread positions other than the global indices and ``blockIdx.z`` (the per-output
    body must be a function of the output's coordinates).  A local that only names a position
    (``const int ty = threadIdx.y;``, ``DEFINE2D(tx, ty, ...)`` expanded) is one where every use of
    it is inside a global index (``by * BY + ty``) or there is none: the rewrite replaces those."""
    covered: list[Node] = []
    for n in view.nodes:
        if n.type == "binary_expression" and any(view.poly(n) == global_index(a) for a in ("x", "y")):
            covered.append(n)

    def inside(n: Node) -> bool:
        return any(c.start_byte <= n.start_byte < c.end_byte for c in covered)

    named = set()  # the initialisers of locals that only name a position
    for loc in view.locals.values():
        if loc.value is None or loc.reassigned or loc.value.type != "field_expression":
            continue
        uses = [
            n
            for n in view.nodes
            if n.type == "identifier"
            and view.text(n) == loc.name
            and not (loc.decl.start_byte <= n.start_byte < loc.decl.end_byte)
        ]
        if all(inside(u) for u in uses):
            named.add(loc.value.id)
    for n in view.nodes:
        if n.type != "field_expression":
            continue
        arg = n.child_by_field_name("argument")
        name = view.text(n).replace(" ", "")
        if arg is None or view.text(arg) not in ("threadIdx", "blockIdx", "blockDim", "gridDim"):
            continue
        if name == "blockIdx.z" or inside(n) or n.id in named:
            continue
        return NotApplicable(f"`{view.text(n)}` is used other than in the global index")
    return None


def _per_output(match: DotMatch, tile_sum: str, names: dict[str, str]) -> str:
    """The original body's statements with the global indices replaced by the output's
    coordinates, the loop by ``tile_sum`` and ``return`` by ``continue``."""
    view = match.view
    data = view.subject.doc.data

    def visit(n: Node) -> list[tuple[int, int, str]]:
        if n == match.loop.node:
            return [(n.start_byte, n.end_byte, tile_sum)]
        if n.type == "return_statement":
            return [(n.start_byte, n.end_byte, "continue;")]
        if n.type == "binary_expression":
            p = view.poly(n)
            for axis, name in names.items():
                if p == global_index(axis):
                    return [(n.start_byte, n.end_byte, name)]
        return [e for c in n.children for e in visit(c)]

    body = view.body
    pos, parts = body.start_byte + 1, []
    for s, e, t in visit(body):
        parts += [data[pos:s].decode(), t]
        pos = e
    return "".join(parts) + data[pos : body.end_byte - 1].decode()


def _element_sum(view: KernelView, loop: Loop, expr: Node) -> str | None:
    """``C[idx] += ...`` as the loop's whole body, ``idx`` the same on every iteration and ``C`` a
    pointer parameter read and written nowhere else: the accumulator's text, else None."""
    if expr.type != "assignment_expression" or view.text(expr.children[1]) != "+=":
        return None
    left = unparenthesized(expr.child_by_field_name("left"))
    by_node = {a.node.id: a for a in view.accesses}
    target = by_node.get(left.id) if left is not None else None
    if (
        target is None
        or target.index is None
        or target.array not in view.params
        or target.via != target.array
    ):
        return None
    if any(loop.var in m for m in target.index):
        return None
    if left is None or any(a.array == target.array and a.node.id != target.node.id for a in view.accesses):
        return None
    return view.text(left)


def _exact_cover(view: KernelView, axis: str, columns: str) -> Poly | None:
    """The bound of the global index along ``axis`` that no guard states: a scalar parameter whose
    value is the launch's extent (grid times block along ``axis``) at the benchmark size and every
    verify size (:func:`engine.guards.launch_covers`), so that the original's threads are exactly its
    range.  Where several are, the
    columns' axis (``columns``) takes the output's row stride and the rows' one a parameter no index
    multiplies."""
    found = [c for c in launch_covers(view, axis) if c in view.params]
    if not found:
        return None
    strides = {atom for x in view.accesses if x.index for m in x.index for atom in m if len(m) > 1}
    stores = {
        atom for x in view.accesses if x.written and x.index for m in x.index for atom in m if len(m) > 1
    }
    if axis == columns:
        ranked = sorted(found, key=lambda n: (n not in stores, found.index(n)))
    else:
        ranked = sorted(found, key=lambda n: (n in strides, found.index(n)))
    return {(ranked[0],): 1}


__all__ = ["DotMatch", "Tile", "TiledDot"]
