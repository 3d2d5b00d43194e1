"""Row-parallel reduction: a thread-per-row kernel becomes a warp (or a block) per row.

Matches (on the :class:`~engine.view.KernelView`) a kernel whose row is the global
thread index (``r = blockIdx.x * blockDim.x + threadIdx.x``, casts allowed) or the iterator of a
grid-stride loop that is the whole body (``for (int i = <global index>; i < B; i += blockDim.x *
gridDim.x)``, Caffe's ``CUDA_KERNEL_LOOP``: its iterations are independent rows), launched with 1-D
blocks on a grid whose x is written over ``block`` (y and z, e.g. a batch over ``blockIdx.y``,
are kept), that reads no other thread position and uses no shared memory, barriers or shuffles.
Its atomics, if any, are statements of their own outside the row loops (``atomicAdd(total,
e);``, the value returned unused) into arrays the kernel touches only through atomics: each row
makes the same atomic updates after the rewrite, from lane 0 (e.g. a row's result added into a
grid-wide sum).  The statements that work on the row are, recursively through
``if``/``{}`` (all their conditions are uniform per row):

- *row loops* ``for (T j = S; j < B; ++j)`` (or ``<=``, ``j++``, ``j += 1``; the bound may depend
  on the row, e.g. a causal ``t2 <= t``) whose locals assigned across iterations are all
  reductions (``+=``, ``-=``, ``*=``, ``fmaxf``/``fminf``/``max``/``min``, compare-and-keep; any
  start value, float or double) read nowhere else in the loop, and whose array writes hit a
  different element for each ``j`` (the index is affine in ``j``) and are read back in the loop
  only at the element written;
- other statements: they compute the same values on every lane; those that write arrays write
  nothing else (an atomic update counts as a write of its array).

Rewrite (params :class:`Rows`): the row becomes the warp's index (``(global index) / 32``) or the
block's (``blockIdx.x``), and a grid-stride loop over the rows steps by the grid's rows
(``blockDim.x / 32 * gridDim.x`` or ``gridDim.x``); every row loop starts at ``S + lane`` and steps by the lanes (32 or
``blockDim.x``); after each loop every reduction is all-reduced (``warp_allreduce_*`` with
``__shfl_xor_sync``; across warps through shared memory for a block), sums and products that
did not start from their identity keep their start value aside; statements that write arrays
outside the loops run on lane 0; a ``__syncwarp()``/``__syncthreads()`` goes before any statement
that reads an array written earlier by other lanes.  The grid is scaled to cover rows x lanes.
"""

from __future__ import annotations

import ast
import textwrap
from dataclasses import dataclass

import tree_sitter

from cudasrc.dtypes import canonical_dtype, dtype_bytes
from cudasrc.launch import LaunchChange
from cudasrc.specs import ScalarSpec, evaluate, render_dims
from engine import _PACKS, NotApplicable, Outcome, _block_names, _rebuild
from engine.passes import PAD, Emitter, Match, Pass
from engine.view import (
    DEPENDENT,
    POSITION,
    KernelView,
    Loop,
    Poly,
    Reduction,
    global_index,
    poly_split,
    poly_uniform,
    statements,
    unparenthesized,
    walk,
    written,
)

Node = tree_sitter.Node
_UNIFORM_POSITIONS = ("blockIdx.y", "blockIdx.z", "gridDim.y", "gridDim.z")  # the same across a row's lanes
LONG_ROW = 16384  # rows at least this long get a block per row as the first guess (a warp otherwise)


@dataclass(frozen=True)
class Rows:
    """``per``: "warp" (32 lanes per row, ``threads / 32`` rows per block) or "block" (one row per
    block of ``threads``); ``vec``: elements per 16-byte vector in the row loops that read their
    arrays contiguously (1: scalar loads only)."""

    per: str
    threads: int
    vec: int = 1


@dataclass(frozen=True)
class RowMatch(Match):
    row: Node  # the row's initial value (the global thread index)
    loops: tuple[Loop, ...]
    single: tuple[Node, ...]  # statements outside loops that write arrays (lane 0 runs them)
    syncs: tuple[Node, ...]  # statements that read arrays other lanes wrote before them
    grid: tuple[str, ...]  # the spec's grid (its x covers the rows)
    row_length: int  # the first loop's bound at the benchmark size (0: unknown)
    stride: Node | None = (
        None  # a grid-stride loop over the rows: its update (``i += blockDim.x * gridDim.x``)
    )


_IDENTITY = {"sum": 0.0, "prod": 1.0}


class RowParallel(Pass[RowMatch]):
    name = "RowParallel"
    space = (
        Rows("warp", 256, 4),
        Rows("block", 256, 4),
        Rows("warp", 128, 4),
        Rows("block", 512, 4),
        Rows("warp", 512, 4),
        Rows("block", 128, 4),
        Rows("block", 1024, 4),
        Rows("warp", 256),
        Rows("warp", 128),
        Rows("block", 256),
        Rows("block", 128),
    )

    def guess(self, match: RowMatch) -> Rows:
        vec = 4 if any(isinstance(_vector_plan(match.view, lp), _VectorPlan) for lp in match.loops) else 1
        return Rows("block", 256, vec) if match.row_length >= LONG_ROW else Rows("warp", 256, vec)

    # ------------------------------------------------------------------------------- match

    def match(self, view: KernelView) -> RowMatch | NotApplicable:
        subject = view.subject
        if what := view.cooperation_besides("atomics"):
            return NotApplicable(f"the kernel already uses {what}: its threads cooperate")
        for call in view.atomics:
            if why := _lone_atomic(view, call):
                return NotApplicable(why)
        block_x = [d for d in subject.block[1:] if d.strip() != "1"]
        grid = subject.grid
        if block_x or not _block_names(grid[0]) or any(_block_names(g) for g in grid[1:]):
            return NotApplicable("the launch is not 1-D blocks on a grid whose x is written over `block`")
        rows = [
            loc
            for loc in view.locals.values()
            if loc.value is not None
            and not loc.reassigned
            and not loc.pointer
            and view.poly(loc.value) == global_index("x")
        ]
        over = _grid_stride(view)
        if len(rows) == 1 and rows[0].value is not None:
            row, stride, body = rows[0].value, None, statements(view.body)
        elif over is not None and over.start is not None and over.node.child_by_field_name("update"):
            row, stride, body = over.start, over.node.child_by_field_name("update"), statements(over.body)
        else:
            return NotApplicable(
                "no single row index `r = blockIdx.x * blockDim.x + threadIdx.x` "
                "nor a grid-stride loop over the rows"
            )
        for n in view.nodes:
            if (
                n.type == "field_expression"
                and view.text(n.child_by_field_name("argument") or n) in POSITION
                and view.text(n).replace(" ", "") not in _UNIFORM_POSITIONS
                and not any(
                    x is not None and x.start_byte <= n.start_byte < x.end_byte for x in (row, stride)
                )
            ):
                return NotApplicable(f"the body reads `{view.text(n)}` besides the row index")
        walker = _Walker(view)
        refused = walker.block(body)
        if refused is not None:
            return refused
        if not walker.loops:
            return NotApplicable("no loop over the row")
        return RowMatch(
            view,
            row,
            tuple(walker.loops),
            tuple(walker.single),
            tuple(walker.syncs),
            subject.grid,
            _length(view, walker.loops[0]),
            stride,
        )

    # ------------------------------------------------------------------------------- rewrite

    def rewrite(self, match: RowMatch, params: object) -> Outcome:
        assert isinstance(params, Rows)
        view = match.view
        e = Emitter(view)
        warp = params.per == "warp"
        lane = e.fresh("lane")
        lanes = "32" if warp else "blockDim.x"
        sync = "__syncwarp();" if warp else "__syncthreads();"
        strided = match.stride.parent if match.stride is not None else None  # a grid-stride loop: before it
        row_stmt = strided if strided is not None else _statement_of(match.row)
        ind = e.indent(row_stmt)
        what = "a warp per row" if warp else "a block per row"
        e.insert_before(
            row_stmt,
            f"// cuda-agent: {what}: lanes stride the row's loops, reductions all-reduce with shuffles\n"
            f"{ind}const int {lane} = threadIdx.x{' % 32' if warp else ''};\n{ind}",
        )
        e.replace(match.row, f"({view.text(match.row)}) / 32" if warp else "blockIdx.x")
        if match.stride is not None:  # the grid-stride loop steps by the grid's rows
            step = "blockDim.x / 32 * gridDim.x" if warp else "gridDim.x"
            e.replace(match.stride, f"{view.text(match.stride).split('+=')[0].strip()} += {step}")
        plans = {id(lp.node): _vector_plan(view, lp) for lp in match.loops} if params.vec > 1 else {}
        if params.vec > 1 and not any(isinstance(v, _VectorPlan) for v in plans.values()):
            reasons = "; ".join(str(v) for v in plans.values())
            return NotApplicable(f"no row loop reads its arrays contiguously in 16-byte vectors: {reasons}")
        syncs = {s.id for s in match.syncs}
        for loop in match.loops:
            assert loop.start is not None
            lind = e.indent(loop.node)
            before: list[str] = [sync] if loop.node.id in syncs else []
            after: list[str] = []
            for c in loop.carried:
                assert c.reduction is not None
                red = c.reduction
                fn = _helper(e, red, warp, view)
                local = view.locals[red.var]
                if red.kind in _IDENTITY and not _starts_at_identity(view, loop, red):
                    saved = e.fresh(f"{red.var}0")
                    before.append(f"const {local.type} {saved} = {red.var};")
                    before.append(f"{red.var} = {_IDENTITY[red.kind]:g};")
                    op = "+" if red.kind == "sum" else "*"
                    after.append(f"{red.var} = {saved} {op} {fn}({red.var});")
                else:
                    after.append(f"{red.var} = {fn}({red.var});")
            start = view.text(loop.start)
            plan = plans.get(id(loop.node))
            if isinstance(plan, _VectorPlan):
                done = e.fresh("done")
                before += _vector_loop(e, plan, lane, lanes, done)
                start = done if start == "0" else f"{_wrap(start)} + {done}"
            e.replace(loop.start, lane if start == "0" else f"{_wrap(start)} + {lane}")
            update = loop.node.child_by_field_name("update")
            assert update is not None
            e.replace(update, f"{loop.var} += {lanes}")
            braces = loop.node.parent is None or loop.node.parent.type != "compound_statement"
            if braces and (before or after):  # the loop is the body of an `if`/`else`: keep them together
                inner = lind + PAD
                e.insert_before(loop.node, "{\n" + "".join(f"{inner}{b}\n" for b in before) + inner)
                e.insert_after(loop.node, "".join(f"\n{inner}{a}" for a in after) + f"\n{lind}}}")
                continue
            if before:
                e.insert_before(loop.node, "".join(f"{b}\n{lind}" for b in before))
            if after:
                e.insert_after(loop.node, "".join(f"\n{lind}{a}" for a in after))
        single = {s.id for s in match.single}
        for s in {x.id: x for x in (*match.syncs, *match.single) if x.type != "for_statement"}.values():
            barrier = s.id in syncs
            guard = f"if ({lane} == 0) " if s.id in single else ""
            parent = s.parent
            if (
                parent is not None
                and parent.type != "compound_statement"
                and (barrier or (parent.type == "if_statement" and parent.child_by_field_name("alternative")))
            ):  # the branch of an `if`: one statement (and no `else` taken by the guard's `if`)
                e.insert_before(s, "{ " + (f"{sync} " if barrier else "") + guard)
                e.insert_after(s, " }")
            else:
                e.insert_before(s, (f"{sync}\n{e.indent(s)}" if barrier else "") + guard)
        if warp:
            scaled = _grid(match.grid[0], ast.BinOp(ast.Name("block"), ast.Div(), ast.Constant(32)))
        else:
            scaled = _grid(match.grid[0], ast.Constant(1))
        launch = LaunchChange(grid=render_dims((scaled, *match.grid[1:])), block=str(params.threads))
        shape = (
            f"{params.threads // 32} rows per {params.threads}-thread block"
            if warp
            else f"{params.threads} threads"
        )
        vectors = ", 16-byte vectors in the row loops" if params.vec > 1 else ""
        return e.rewrite(f"{what} ({shape}){vectors}, shuffle reductions", launch)


class _Walker:
    """Walks the statements that work on a row, collecting row loops, lane-0 writes and the
    statements that need a barrier before them (or the reason the kernel does not fit)."""

    def __init__(self, view: KernelView) -> None:
        self.view = view
        self.loops: list[Loop] = []
        self.single: list[Node] = []
        self.syncs: list[Node] = []
        self.pending: set[str] = set()  # arrays written since the last barrier

    def block(self, stmts: list[Node]) -> NotApplicable | None:
        for s in stmts:
            refused = self.statement(s)
            if refused is not None:
                return refused
        return None

    def _touches(self, s: Node) -> set[str]:
        """The arrays ``s`` reads (neither a plain ``a[i] = ...`` nor an atomic's ``&a[i]`` reads
        ``a``)."""
        view = self.view
        updated = {
            t.parent.id for c in view.atomics if (t := _atomic_target(view, c)) is not None and t.parent
        }
        return {
            a.array
            for a in view.accesses
            if s.start_byte <= a.node.start_byte < s.end_byte
            and not (a.written and _plain_store(a.node))
            and a.node.id not in updated
        }

    def _writes(self, s: Node) -> list[tuple[str, Node]]:
        """The arrays ``s`` writes: its assigned subscripts and its atomics' targets."""
        view = self.view
        inside = range(s.start_byte, s.end_byte)
        return [(a.array, a.node) for a in view.accesses if a.written and a.node.start_byte in inside] + [
            (view.text(target), call)
            for call in view.atomics
            if call.start_byte in inside and (target := _atomic_target(view, call)) is not None
        ]

    def statement(self, s: Node) -> NotApplicable | None:
        view = self.view
        if s.type == "compound_statement":
            return self.block(statements(s))
        if s.type == "if_statement":
            if self._touches(s.child_by_field_name("condition") or s) & self.pending:
                self._sync(s)
            for part in ("consequence", "alternative"):
                branch = s.child_by_field_name(part)
                if branch is not None and branch.type == "else_clause":
                    branch = branch.named_children[0] if branch.named_children else None
                if branch is not None:
                    refused = self.statement(branch)
                    if refused is not None:
                        return refused
            return None
        if s.type == "for_statement":
            loop = view.loop_of(s)
            assert loop is not None
            return self.row_loop(loop)
        if s.type in (
            "while_statement",
            "do_statement",
            "switch_statement",
            "goto_statement",
            "labeled_statement",
        ):
            return NotApplicable(f"a `{s.type.split('_')[0]}` over the row")
        if any(n.type == "for_statement" for n in walk(s)):
            return NotApplicable("a loop inside an expression")
        if self._touches(s) & self.pending:
            self._sync(s)
        writes = self._writes(s)
        derefs = [
            n
            for n in walk(s)
            if n.type == "pointer_expression" and n.children[0].type == "*" and _assigned(n)
        ]
        if derefs:
            return NotApplicable(f"`{view.text(s)}` writes through a pointer")
        if writes:
            if s.type == "declaration" or any(
                n.type in ("assignment_expression", "update_expression")
                and (t := unparenthesized(n.child_by_field_name("left") or n.child_by_field_name("argument")))
                is not None
                and t.type == "identifier"
                for n in walk(s)
            ):
                return NotApplicable(f"`{view.text(s)}` writes an array and a local at once")
            self.single.append(s)
            self.pending |= {a for a, _ in writes}
        return None

    def _sync(self, s: Node) -> None:
        self.syncs.append(s)
        self.pending.clear()

    def row_loop(self, loop: Loop) -> NotApplicable | None:
        view = self.view
        head = view.text(loop.node).split(")")[0] + ")"
        if (
            not loop.var
            or loop.start is None
            or loop.bound is None
            or loop.op not in ("<", "<=")
            or loop.step != 1
        ):
            return NotApplicable(f"`{head}` is not `for (j = start; j < bound; ++j)`")
        for c in loop.carried:
            if c.reduction is None:
                return NotApplicable(f"in `{head}`: {c.reason}")
            if c.name not in view.locals or view.locals[c.name].pointer:
                return NotApplicable(f"in `{head}`: `{c.name}` is not a scalar local")
        carried = {c.name for c in loop.carried}
        if (view.names(loop.bound) | view.names(loop.start)) & carried:
            return NotApplicable(f"the bound of `{head}` depends on what the loop computes")
        for n in walk(loop.body):
            if n.type in ("return_statement", "break_statement", "goto_statement"):
                return NotApplicable(f"`{head}` leaves the loop early")
            if n.type in ("assignment_expression", "update_expression"):
                target = unparenthesized(n.child_by_field_name("left") or n.child_by_field_name("argument"))
                if target is not None and view.text(target) == loop.var:
                    return NotApplicable(f"`{head}` assigns its variable in the body")
            if n.type == "pointer_expression" and n.children[0].type == "*" and _assigned(n):
                return NotApplicable(f"`{head}` writes through a pointer")
        if any(loop.body.start_byte <= c.start_byte < loop.body.end_byte for c in view.atomics):
            return NotApplicable(f"`{head}` updates an array atomically: its lanes would split the updates")
        inside = [a for a in view.accesses if loop.node.start_byte <= a.node.start_byte < loop.node.end_byte]
        params = view.params
        for a in inside:
            p = params.get(a.array)
            if p is None or p.pointer < 1:
                return NotApplicable(f"`{a.via}` is a local array: each lane would hold part of it")
        written: set[str] = set()
        for a in inside:
            if not a.written:
                continue
            coeff, _ = poly_split(a.index, loop.var) if a.index is not None else ({}, {})
            if (
                not coeff
                or coeff == {(): 0}
                or not poly_uniform(coeff)
                or any(
                    lp.var in m for lp in view.loops if lp.var and lp.var != loop.var for m in a.index or {}
                )
            ):
                return NotApplicable(
                    f"`{view.text(a.node)}` in `{head}` does not write one element per `{loop.var}`"
                )
            written.add(a.array)
        for a in inside:
            if a.array in written and a.index is not None:
                same = [b for b in inside if b.written and b.array == a.array and b.index == a.index]
                if not same:
                    return NotApplicable(f"`{head}` reads `{a.array}` at other elements than it writes")
            elif a.array in written:
                return NotApplicable(f"`{head}` reads `{a.array}` through an index it cannot follow")
        if self._touches(loop.node) & self.pending:
            self._sync(loop.node)
        self.pending |= set(written)
        self.loops.append(loop)
        return None


@dataclass(frozen=True)
class _VectorPlan:
    """How one row loop reads and writes its arrays through 16-byte vectors."""

    loop: Loop
    lanes: int  # elements per vector
    arrays: dict[str, tuple[str, tuple[Node, ...]]]  # name as written -> (element type, its subscripts)
    loaded: frozenset[str]  # vectors read before the body runs (read, or not assigned on every path)
    stored: frozenset[str]  # vectors written back after the body
    uses_var: bool  # the body reads the loop variable besides the vectorized subscripts


def _vector_plan(view: KernelView, loop: Loop) -> _VectorPlan | str:
    """The plan to run ``loop`` (a row loop) on 16-byte vectors, or why it cannot: every subscript
    of its body whose index involves the loop variable is ``base + j`` (``base`` the same for every
    lane of a row) into a parameter array, each array at one index through one name, all of one 4-
    or 8-byte element type that has a vector type; the body does not ``continue``."""
    head = view.text(loop.node).split(")")[0] + ")"
    body = loop.body
    if any(n.type == "continue_statement" for n in walk(body)):
        return f"`{head}` continues early"
    others = [lp.var for lp in view.loops if lp.var and lp.var != loop.var]
    found: dict[str, tuple[str, list[Node]]] = {}
    index_of: dict[str, Poly] = {}
    name_of: dict[str, str] = {}
    for a in view.accesses:
        idx = a.node.child_by_field_name("indices")
        if not (body.start_byte <= a.node.start_byte < body.end_byte) or idx is None:
            continue
        if loop.var not in view.names(idx):
            continue
        coeff, rest = poly_split(a.index, loop.var) if a.index is not None else ({(): 0}, {})
        if coeff != {(): 1} or any(v in m for v in others for m in rest):
            return f"`{view.text(a.node)}` in `{head}` is not `base + {loop.var}`"
        param = view.params.get(a.array)
        if param is None or param.pointer != 1 or a.address:
            return f"`{view.text(a.node)}` in `{head}` is not an element of an array parameter"
        if index_of.setdefault(a.via, rest) != rest:
            return f"`{head}` reads `{a.via}` at two offsets"
        if name_of.setdefault(a.array, a.via) != a.via:
            return f"`{head}` reaches `{a.array}` through two names"
        found.setdefault(a.via, (view.element_type(a.array), []))[1].append(a.node)
    if not found:
        return f"`{head}` reads no array at `{loop.var}`"
    sizes = {dtype_bytes(d) if (d := canonical_dtype(t)) else 0 for t, _ in found.values()}
    if (
        len(sizes) != 1
        or not sizes <= {4, 8}
        or any((canonical_dtype(t), 16) not in _PACKS for t, _ in found.values())
    ):
        return f"the arrays of `{head}` do not share one 4- or 8-byte element type with a vector type"
    arrays = {name: (t, tuple(subs)) for name, (t, subs) in found.items()}
    stored = frozenset(n for n, (_, subs) in arrays.items() if any(written(x) for x in subs))
    loaded = frozenset(n for n, (_, subs) in arrays.items() if not _assigned_first(body, subs))
    inside = {x.id for _, subs in arrays.values() for sub in subs for x in walk(sub)}
    uses_var = any(
        n.type == "identifier" and view.text(n) == loop.var and n.id not in inside for n in walk(body)
    )
    return _VectorPlan(loop, 16 // sizes.pop(), arrays, loaded, stored, uses_var)


def _assigned_first(body: Node, subs: tuple[Node, ...]) -> bool:
    """Whether every iteration assigns the element (``a[j] = e;``, a statement of ``body`` itself,
    ``e`` not reading it) before anything else reads it: its vector then needs no load."""
    for st in statements(body):
        mine = [x for x in subs if st.start_byte <= x.start_byte < st.end_byte]
        if not mine:
            continue
        expr = st.named_children[0] if st.type == "expression_statement" and st.named_children else None
        return (
            expr is not None
            and expr.type == "assignment_expression"
            and expr.children[1].type == "="
            and mine == [unparenthesized(expr.child_by_field_name("left"))]
        )
    return False


def _vector_loop(
    e: Emitter, plan: _VectorPlan, lane: str, lanes: str, done: str, row_start: str | None = None
) -> list[str]:
    """The lines of the vector part of a row loop, before its scalar loop (which then starts
    ``done`` elements later): when every array's row is 16-byte aligned, the lanes stride the
    row's vectors and run the body on each element of their vectors.  A loop that starts at a
    constant inside a vector (``j = 1``) starts its vectors at the vector's first element and
    skips the elements before its start.  ``row_start``: where the row starts when it is not
    the loop's start (a loop whose threads start at their own index)."""
    view, loop = e.view, plan.loop
    assert loop.start is not None and loop.bound is not None
    start, bound = row_start or view.text(loop.start), view.text(loop.bound)
    head = int(start) % plan.lanes if start.isdigit() else 0  # elements of the first vector to skip
    start = str(int(start) - head) if head else start
    init = loop.node.child_by_field_name("initializer")
    var_type = view.text(init.child_by_field_name("type") or init) if init is not None else "int"
    n, v, k = e.fresh("nv"), e.fresh("v"), e.fresh("k")
    first = _wrap(start)

    def at_start(sub: Node) -> str:  # &a[index with the loop variable at its start]
        return "&" + _rebuild(
            view.subject,
            sub,
            lambda x: first if x.type == "identifier" and view.text(x) == loop.var else None,
        )

    length = (
        f"(long long)({bound})"
        + ("" if start == "0" else f" - {first}")
        + (" + 1" if loop.op == "<=" else "")
    )
    addresses = {a: at_start(subs[0]) for a, (_, subs) in plan.arrays.items()}
    aligned = " | ".join(f"reinterpret_cast<unsigned long long>({p})" for p in addresses.values())
    pointers: list[str] = []
    per_vector: list[str] = []
    stores: list[str] = []
    element: dict[int, str] = {}
    for a, (base, subs) in plan.arrays.items():
        vt = _PACKS[(canonical_dtype(base) or "", 16)]
        const = "" if a in plan.stored else "const "
        stem = a.removeprefix("ca_")
        ptr, vec, lane_ptr = e.fresh(f"{stem}4"), e.fresh(f"{stem}_v"), e.fresh(f"{stem}_e")
        pointers.append(f"{const}{vt}* {ptr} = reinterpret_cast<{const}{vt}*>({addresses[a]});")
        per_vector.append(f"{const}{vt} {vec}" + (f" = {ptr}[{v}];" if a in plan.loaded else ";"))
        per_vector.append(f"{const}{base}* {lane_ptr} = reinterpret_cast<{const}{base}*>(&{vec});")
        if a in plan.stored:
            stores.append(f"{ptr}[{v}] = {vec};")
        element |= {x.id: f"{lane_ptr}[{k}]" for x in subs}
    inner = _rebuild(view.subject, loop.body, lambda x: element.get(x.id))
    offset = "" if start == "0" else f"{first} + "
    index = f"const {var_type} {loop.var} = ({var_type})({offset}{v} * {plan.lanes} + {k});"
    skip = f"if ({v} == 0 && {k} < {head}) continue;  // before the loop's start"
    counted = f"{n} > 0 ? {n} * {plan.lanes} - {head} : 0" if head else f"{n} * {plan.lanes}"
    return [
        f"long long {done} = 0;  // elements of the row done with 16-byte vectors",
        f"if ((({aligned}) % 16) == 0) {{",
        # no vector when the row is empty: the quotient of a negative length rounds towards zero
        f"{PAD}const long long {n} = ({length}) / {plan.lanes};",
        *(PAD + x for x in pointers),
        f"{PAD}for (long long {v} = {lane}; {v} < {n}; {v} += {lanes}) {{",
        *(PAD * 2 + x for x in per_vector),
        f"{PAD * 2}#pragma unroll",
        f"{PAD * 2}for (int {k} = 0; {k} < {plan.lanes}; ++{k}) {{",
        *([PAD * 3 + skip] if head else []),
        *([PAD * 3 + index] if plan.uses_var else []),
        *(PAD * 3 + x for x in _body_lines(inner)),
        f"{PAD * 2}}}",
        *(PAD * 2 + x for x in stores),
        f"{PAD}}}",
        f"{PAD}{done} = {counted};",
        "}",
    ]


def _body_lines(text: str) -> list[str]:
    """A loop body's text as lines without their common indentation (a braced block's braces
    dropped: the lines go into another block)."""
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    if len(lines) > 1 and not lines[0].startswith((" ", "\t")):
        lines = [lines[0], *textwrap.dedent("\n".join(lines[1:])).splitlines()]
    return textwrap.dedent("\n".join(lines)).splitlines() or [";"]


def _atomic_target(view: KernelView, call: Node) -> Node | None:
    """The name node of the array the atomic ``call`` updates (its address ``&a[k]``, ``a + k``
    or ``a``)."""
    args = call.child_by_field_name("arguments")
    address = args.named_children[0] if args is not None and args.named_children else None
    return view.atomic_target(address, bare=True) if address is not None else None


def _lone_atomic(view: KernelView, call: Node) -> str:
    """Why the atomic ``call`` could not run on a row's lane 0 alone ('' when it can): it is a
    statement of its own (its value unused) into a pointer parameter that the kernel names
    nowhere but in its atomics' addresses (nothing reads what other rows add)."""
    target = _atomic_target(view, call)
    name = view.text(target) if target is not None else ""
    p = view.params.get(name)
    if target is None or p is None or p.pointer < 1:
        return f"`{view.text(call)}` updates an address that is not in an array parameter"
    if call.parent is None or call.parent.type != "expression_statement":
        return f"the value `{view.text(call)}` returns is used: one lane per row would run it"
    targets = {t.id for c in view.atomics if (t := _atomic_target(view, c)) is not None}
    if any(n.type == "identifier" and view.text(n) == name and n.id not in targets for n in view.nodes):
        return f"`{name}` is used besides its atomic updates"
    return ""


def _plain_store(n: Node) -> bool:
    p = n.parent
    return p is not None and p.type == "assignment_expression" and p.children[1].type == "="


def _assigned(n: Node) -> bool:
    p = n.parent
    return p is not None and (
        (p.type == "assignment_expression" and p.child_by_field_name("left") == n)
        or p.type == "update_expression"
    )


def _statement_of(n: Node) -> Node:
    while n.parent is not None and n.type not in ("declaration", "expression_statement"):
        n = n.parent
    return n


def _wrap(text: str) -> str:
    return text if text.replace("_", "").isalnum() else f"({text})"


def _starts_at_identity(view: KernelView, loop: Loop, red: Reduction) -> bool:
    """Whether ``red.var`` holds its identity (0 for sums, 1 for products) when ``loop`` starts:
    declared with that literal and not assigned before the loop."""
    local = view.locals[red.var]
    v = unparenthesized(local.value)
    if v is None or v.type != "number_literal":
        return False
    try:
        value = float(view.text(v).rstrip("fFlLuU"))
    except ValueError:
        return False
    if value != _IDENTITY[red.kind]:
        return False
    for n in view.nodes:
        if n.type in ("assignment_expression", "update_expression") and n.start_byte < loop.node.start_byte:
            t = unparenthesized(n.child_by_field_name("left") or n.child_by_field_name("argument"))
            if t is not None and view.text(t) == red.var:
                return False
    return True


_COMBINE = {
    "+": ("sum", "v += w;"),
    "*": ("prod", "v *= w;"),
    ">": ("keep_max", "if (w > v) v = w;"),
    "<": ("keep_min", "if (w < v) v = w;"),
}


def _helper(e: Emitter, red: Reduction, warp: bool, view: KernelView) -> str:
    suffix, combine = _COMBINE.get(red.combine, (red.combine, f"v = {red.combine}(v, w);"))
    warp_name = e.helper(
        f"warp_allreduce_{suffix}",
        f"template <typename T>\n__device__ __forceinline__ T warp_allreduce_{suffix}(T v) {{\n"
        f"{PAD}#pragma unroll\n"
        f"{PAD}for (int offset = 16; offset > 0; offset >>= 1) {{\n"
        f"{PAD * 2}const T w = __shfl_xor_sync(0xffffffffu, v, offset);\n"
        f"{PAD * 2}{combine}\n"
        f"{PAD}}}\n"
        f"{PAD}return v;\n}}",
    )
    if warp:
        return warp_name
    return e.helper(
        f"block_allreduce_{suffix}",
        f"template <typename T>\n__device__ T block_allreduce_{suffix}(T v) {{\n"
        f"{PAD}__shared__ T partial[32];  // one value per warp\n"
        f"{PAD}v = {warp_name}(v);\n"
        f"{PAD}if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;\n"
        f"{PAD}__syncthreads();\n"
        f"{PAD}v = partial[0];\n"
        f"{PAD}for (unsigned k = 1; k < (blockDim.x + 31) / 32; ++k) {{\n"
        f"{PAD * 2}const T w = partial[k];\n"
        f"{PAD * 2}{combine}\n"
        f"{PAD}}}\n"
        f"{PAD}__syncthreads();  // partial is reused by the next reduction\n"
        f"{PAD}return v;\n}}",
    )


class _Block(ast.NodeTransformer):
    def __init__(self, value: ast.expr) -> None:
        self.value = value

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return self.value if node.id in ("block", "block_x") else node


def _grid(grid: str, value: ast.expr) -> str:
    """The spec's grid expression with the block size replaced by ``value`` (rows per block)."""
    tree = _Block(value).visit(ast.parse(grid, mode="eval"))
    return ast.unparse(ast.fix_missing_locations(tree))


def _grid_stride(view: KernelView) -> Loop | None:
    """The kernel's body when it is one grid-stride loop over the rows, ``for (T i = blockIdx.x *
    blockDim.x + threadIdx.x; i < B; i += blockDim.x * gridDim.x)`` (Caffe's ``CUDA_KERNEL_LOOP``):
    its iterations are independent rows whatever the grid, each thread taking every grid-th one."""
    (s, *more) = statements(view.body) or [view.body]
    loop = view.loop_of(s) if not more and s.type == "for_statement" else None
    update = loop.node.child_by_field_name("update") if loop is not None else None
    if loop is None or loop.start is None or update is None or update.type != "assignment_expression":
        return None
    step = update.child_by_field_name("right")
    left = unparenthesized(update.child_by_field_name("left"))
    if (
        view.text(update.children[1]) != "+="
        or left is None
        or view.text(left) != loop.var
        or step is None
        or loop.op != "<"
        or view.poly(loop.start) != global_index("x")
        or view.poly(step) != {("blockDim.x", "gridDim.x"): 1}
    ):
        return None
    return loop


def _length(view: KernelView, loop: Loop) -> int:
    """The loop's bound at the benchmark size when it is a scalar parameter (0: unknown)."""
    bound = unparenthesized(loop.bound)
    if bound is None or bound.type != "identifier":
        return 0
    spec = view.subject.spec
    scalars = {a.name: a.value for a in spec.args if isinstance(a, ScalarSpec)}
    if view.text(bound) not in scalars:
        return 0
    env: dict[str, object] = {}
    try:
        for name, value in spec.sizes.items():
            env[name] = evaluate(value, env)  # type: ignore[arg-type]
        length = evaluate(scalars[view.text(bound)], env)  # type: ignore[arg-type]
    except ValueError:
        return 0
    return int(length) if isinstance(length, int | float) else 0


# ------------------------------------------------------------------------------- block-strided loops


@dataclass(frozen=True)
class StridedMatch(Match):
    plan: _VectorPlan
    tid: str  # the loop's start as written: the thread's index in the block


class StridedRowVectors(Pass[StridedMatch]):
    """A block-strided loop over a row, ``for (j = threadIdx.x; j < n; j += blockDim.x)`` (the row
    the same for the whole block, e.g. a block per row), whose partial results are combined
    afterwards by a tree of the same operation over a ``__shared__`` array (``X[tid] = v;`` then
    only ``X[i] = op(X[i], X[k])`` / ``X[i] += X[k]`` and reads at constant indices): the threads
    stride 16-byte vectors of the row instead, then the scalar rest.  Each thread's share of the
    row changes, the combined result does not (but for the order of a sum's additions)."""

    name = "StridedRowVectors"
    space = (16,)  # bytes per load

    def match(self, view: KernelView) -> StridedMatch | NotApplicable:
        if any(d.strip() != "1" for d in view.subject.block[1:]):
            return NotApplicable("the blocks are not 1-D")
        reasons = []
        for loop in view.loops:
            found = self._loop(view, loop)
            if isinstance(found, StridedMatch):
                return found
            if found:
                reasons.append(found)
        return NotApplicable(
            reasons[0] if reasons else "no loop `for (j = threadIdx.x; j < n; j += blockDim.x)` over a row"
        )

    def _loop(self, view: KernelView, loop: Loop) -> StridedMatch | str:
        """The match, why this block-strided loop does not fit, or "" when it is not one."""
        if loop.parent is not None or not loop.var or loop.start is None or loop.bound is None:
            return ""
        update = loop.node.child_by_field_name("update")
        step = update.child_by_field_name("right") if update is not None else None
        if (
            loop.op not in ("<", "<=")
            or view.poly(loop.start) != {("threadIdx.x",): 1}
            or update is None
            or update.type != "assignment_expression"
            or view.text(update.children[1]) != "+="
            or view.text(update.child_by_field_name("left") or update) != loop.var
            or step is None
            or view.poly(step) != {("blockDim.x",): 1}
        ):
            return ""
        head = view.text(loop.node).split(")")[0] + ")"
        if not view.uniform(loop.bound):
            return f"the bound of `{head}` differs between the threads of a block"
        inside = range(loop.body.start_byte, loop.body.end_byte)
        if any(n.start_byte in inside for n in (*view.barriers, *view.shuffles, *view.atomics)):
            return f"the threads of `{head}` cooperate inside it"
        for n in walk(loop.body):
            if n.type in ("return_statement", "break_statement", "goto_statement"):
                return f"`{head}` leaves the loop early"
            target = unparenthesized(n.child_by_field_name("left") or n.child_by_field_name("argument"))
            if (
                n.type in ("assignment_expression", "update_expression")
                and target is not None
                and (target.type == "pointer_expression" or view.text(target) == loop.var)
            ):
                return f"`{head}` assigns its variable or writes through a pointer"
        plan = _vector_plan(view, loop)
        if isinstance(plan, str):
            return plan
        if plan.stored:
            return f"`{head}` writes arrays"
        for a in view.accesses:
            if a.node.start_byte in inside and a.index is not None:
                _, rest = poly_split(a.index, loop.var)
                if any(x.startswith(("threadIdx.", DEPENDENT)) for m in rest for x in m):
                    return f"`{view.text(a.node)}` in `{head}` is not in a row shared by the block"
        if not loop.carried:
            return f"`{head}` computes no partial result"
        for c in loop.carried:
            if c.reduction is None or c.reduction.kind not in ("sum", "max", "min"):
                return f"in `{head}`: `{c.name}` is not a sum, max or min"
            why = _combined_by_tree(view, loop, c.reduction)
            if why:
                return why
        return StridedMatch(view, plan, view.text(loop.start))

    def rewrite(self, match: StridedMatch, params: object) -> Outcome:
        view, loop = match.view, match.plan.loop
        assert loop.start is not None
        e = Emitter(view)
        done = e.fresh("done")
        lines = _vector_loop(e, match.plan, match.tid, "blockDim.x", done, row_start="0")
        lind = e.indent(loop.node)
        if loop.node.parent is None or loop.node.parent.type != "compound_statement":
            inner = lind + PAD
            e.insert_before(loop.node, "{\n" + "".join(f"{inner}{x}\n" for x in lines) + inner)
            e.insert_after(loop.node, f"\n{lind}}}")
        else:
            e.insert_before(loop.node, "".join(f"{x}\n{lind}" for x in lines))
        e.replace(loop.start, f"{done} + {match.tid}")
        arrays = ", ".join(f"`{a}`" for a in match.plan.arrays)
        return e.rewrite(f"16-byte vector loads of {arrays} in the block-strided loop")


def _combined_by_tree(view: KernelView, loop: Loop, red: Reduction) -> str:
    """Why the per-thread partial ``red.var`` of ``loop`` is not only stored once into a
    ``__shared__`` array at the thread's index and combined there by ``red.kind`` ('' when it is)."""
    after = [
        n
        for n in view.nodes
        if n.type == "identifier" and view.text(n) == red.var and n.start_byte >= loop.node.end_byte
    ]
    store = _statement_of(after[0]) if len(after) == 1 else None
    expr = store.named_children[0] if store is not None and store.named_children else None
    left = unparenthesized(expr.child_by_field_name("left")) if expr is not None else None
    right = unparenthesized(expr.child_by_field_name("right")) if expr is not None else None
    shared = {
        view.text(n.child_by_field_name("declarator") or n)
        for d in view.shared
        for n in d.children_by_field_name("declarator")
        if n.type == "array_declarator"
    }
    stored = next((a for a in view.accesses if left is not None and a.node == left), None)
    if (
        store is None
        or expr is None
        or expr.type != "assignment_expression"
        or view.text(expr.children[1]) != "="
        or right is None
        or right != after[0]
        or stored is None
        or stored.array not in shared
        or stored.index != {("threadIdx.x",): 1}
    ):
        return (
            f"`{red.var}` is used after its loop other than stored once at `X[threadIdx.x]` of a __shared__ X"
        )
    x = stored.array
    later = [a for a in view.accesses if a.array == x and a.node.start_byte >= store.end_byte]
    steps = {_statement_of(a.node).id: _statement_of(a.node) for a in later if a.written}
    last = max((st.end_byte for st in steps.values()), default=0)
    for a in later:
        s = _statement_of(a.node)
        if s.id in steps:
            if not _combines(view, s, x, red.kind):
                return f"`{view.text(s)}` does not combine the partials of `{red.var}` by {red.kind}"
        elif a.index != {} or a.node.start_byte < last:  # only the total, X[0], once combined
            return f"`{view.text(a.node)}` reads a partial of `{red.var}`, not their combination in `{x}[0]`"
    return "" if steps else f"the partials of `{red.var}` in `{x}` are not combined"


def _combines(view: KernelView, s: Node, x: str, kind: str) -> bool:
    """Whether statement ``s`` is ``X[i] += X[k];`` / ``X[i] = X[i] + X[k];`` (sum) or
    ``X[i] = fmaxf(X[i], X[k]);`` (max; min alike), X the shared array ``x``."""
    expr = s.named_children[0] if s.type == "expression_statement" and s.named_children else None
    if expr is None or expr.type != "assignment_expression":
        return False
    left, right = (
        unparenthesized(expr.child_by_field_name("left")),
        unparenthesized(expr.child_by_field_name("right")),
    )
    op = view.text(expr.children[1])
    if left is None or right is None:
        return False

    def element(n: Node | None) -> bool:
        n = unparenthesized(n)
        return any(a.node == n and a.array == x for a in view.accesses)

    if not element(left):
        return False
    if kind == "sum" and op == "+=":
        return element(right)
    if op != "=":
        return False
    if kind == "sum" and right.type == "binary_expression" and view.text(right.children[1]) == "+":
        operands = [right.child_by_field_name("left"), right.child_by_field_name("right")]
    elif right.type == "call_expression":
        fn, args = right.child_by_field_name("function"), right.child_by_field_name("arguments")
        if fn is None or args is None or _KIND_OF.get(view.text(fn)) != kind:
            return False
        operands = list(args.named_children)
    else:
        return False
    found = [unparenthesized(o) for o in operands]
    return (
        len(found) == 2
        and all(element(o) for o in found)
        and any(o is not None and view.tokens(o) == view.tokens(left) for o in found)
    )


_KIND_OF = {"fmaxf": "max", "fmax": "max", "max": "max", "fminf": "min", "fmin": "min", "min": "min"}
