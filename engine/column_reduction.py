"""Column reduction: a thread-per-column reduction loop becomes a block that owns 32 adjacent
columns, its ``R`` rows of threads splitting the loop, combined through a shared-memory tree.

Matches (on the :class:`~engine.view.KernelView`) a 1-D kernel (it reads neither
``threadIdx.y`` nor ``blockDim.y``, no shared memory, barriers, atomics or shuffles) launched on a
grid whose x is written over the block, with one outermost loop ``for (T r = S; r < B; ++r)`` (or
``<=``, ``r++``, ``r += 1``) whose locals assigned across iterations are all reductions (``+=``,
``*=``, ``fmaxf``/``max``/``fminf``/``min``, compare-and-keep; any start value), that writes no
array, has no ``break``/``return``, and reads an array down a column: an index with
``threadIdx.x`` at coefficient 1 and ``r`` at a stride other than 1 (``x[r * cols + c]``, any form).
Around the loop: declarations that read no array, guards ``if (G) return;`` before it, or one
``if (W) { ... loop ... }`` holding it (last in the body); after it, anything (the epilogue).

Rewrite (params ``R``, a power of two): blocks of ``(32, R)`` threads; the guards become a flag
``ok`` (so every thread reaches the barriers); thread row ``y`` runs iterations ``S + y, S + y + R,
...`` (a thread other than row 0 starts sums from 0 and products from 1); the partial results meet
in ``__shared__ T part[R][32]`` and a tree of ``log2 R`` steps; row 0 runs the epilogue with the
combined values.  The order of the combination changes (sums may differ in the last bits).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from cudasrc.launch import LaunchChange
from engine.guards import over_block
from engine.passes import PAD, Emitter, Match, NotApplicable, Outcome, Pass
from engine.view import KernelView, Loop, Reduction, poly_split, statements, walk

Node = tree_sitter.Node


@dataclass(frozen=True)
class ColumnMatch(Match):
    loop: Loop
    reductions: tuple[Reduction, ...]
    before: tuple[Node, ...]  # the statements up to the loop (guards among them), flattened
    guards: tuple[tuple[Node, bool], ...]  # (guard statement, whether it is a wrapper `if (W) {...}`)
    after: tuple[Node, ...]  # the epilogue


def _reads_arrays(view: KernelView, node: Node) -> bool:
    return any(node.start_byte <= a.node.start_byte < node.end_byte for a in view.accesses)


def _guardable(view: KernelView, decl: Node) -> bool:
    """``T v = e;`` (one plain variable, no qualifiers): it can become ``T v{}; if (ok) v = e;``."""
    decls = decl.children_by_field_name("declarator")
    return (
        len(decls) == 1
        and decls[0].type == "init_declarator"
        and (name := decls[0].child_by_field_name("declarator")) is not None
        and name.type == "identifier"
        and not any(c.type == "type_qualifier" for c in decl.children)
    )


class ColumnReduction(Pass[ColumnMatch]):
    name = "ColumnReduction"
    space = (16, 8, 32, 4)  # rows of threads per block; 16: 512 threads, enough warps to hide latency

    def match(self, view: KernelView) -> ColumnMatch | NotApplicable:
        if view.cooperation:
            return NotApplicable(f"the kernel already uses {view.cooperation}")
        used = view.positions(view.body)
        if {"threadIdx.y", "blockDim.y", "threadIdx.z", "blockDim.z"} & used:
            return NotApplicable("the kernel already uses a 2-D or 3-D block")
        grid = view.subject.grid
        if not grid or not over_block(grid[0]):
            return NotApplicable("the spec's grid x is not written over the block")
        outer = [lp for lp in view.loops if lp.parent is None]
        if len(outer) != 1:
            return NotApplicable("the kernel has no single outermost loop")
        loop = outer[0]
        if not loop.var or loop.step != 1 or loop.op not in ("<", "<=") or loop.bound is None:
            return NotApplicable("the loop is not `for (T r = S; r < B; ++r)`")
        if any(c.reduction is None for c in loop.carried):
            bad = next(c for c in loop.carried if c.reduction is None)
            return NotApplicable(f"the loop carries `{bad.name}`: {bad.reason}")
        if not loop.carried:
            return NotApplicable("the loop reduces nothing")
        inside = [a for a in view.accesses if loop.node.start_byte <= a.node.start_byte < loop.node.end_byte]
        if any(a.written or a.address for a in inside):
            return NotApplicable("the loop writes an array")
        if any(n.type in ("break_statement", "return_statement", "goto_statement") for n in walk(loop.body)):
            return NotApplicable("the loop leaves early")
        if not any(self._down_a_column(a.index, loop.var) for a in inside):
            return NotApplicable("no read walks down a column (`x[r * cols + c]`): a row reduction")
        found = self._around(view, loop)
        if isinstance(found, NotApplicable):
            return found
        before, guards, after = found
        reductions = tuple(c.reduction for c in loop.carried if c.reduction is not None)
        if any(r.var not in view.locals for r in reductions):
            return NotApplicable("a reduction is not a local of the kernel")
        return ColumnMatch(view, loop, reductions, before, guards, after)

    @staticmethod
    def _down_a_column(index: dict[tuple[str, ...], int] | None, var: str) -> bool:
        if index is None or index.get(("threadIdx.x",)) != 1:
            return False
        stride, _ = poly_split(index, var)
        return bool(stride) and stride != {(): 1} and stride != {(): 0}

    @staticmethod
    def _around(
        view: KernelView, loop: Loop
    ) -> tuple[tuple[Node, ...], tuple[tuple[Node, bool], ...], tuple[Node, ...]] | NotApplicable:
        level = statements(view.body)
        before: list[Node] = []
        guards: list[tuple[Node, bool]] = []
        while loop.node not in level:
            holder = next((s for s in level if s.start_byte <= loop.node.start_byte < s.end_byte), None)
            conseq = holder.child_by_field_name("consequence") if holder is not None else None
            if (
                holder is None
                or holder.type != "if_statement"
                or holder.child_by_field_name("alternative") is not None
                or conseq is None
                or holder != level[-1]
            ):
                return NotApplicable("the loop is not at the top of the body or inside one `if` ending it")
            before += [*level[: level.index(holder)], holder]  # the wrapper stands where its test is
            guards.append((holder, True))
            level = statements(conseq)
        at = level.index(loop.node)
        before += level[:at]
        guarded = False  # whether a guard precedes: array reads after one run only where it holds
        for s in before:
            if any(s == g for g, _ in guards):
                guarded = True
                continue
            conseq = s.child_by_field_name("consequence") if s.type == "if_statement" else None
            if (
                conseq is not None
                and s.child_by_field_name("alternative") is None
                and [c.type for c in statements(conseq)] == ["return_statement"]
            ):
                if _reads_arrays(view, s):
                    return NotApplicable("a guard before the loop reads an array")
                guards.append((s, False))
                guarded = True
            elif s.type != "declaration" or (
                _reads_arrays(view, s) and not (guarded and _guardable(view, s))
            ):
                return NotApplicable(
                    f"`{view.text(s)}` before the loop is not a declaration (one reading arrays after the guards)"
                )
        return tuple(before), tuple(guards), tuple(level[at + 1 :])

    def rewrite(self, match: ColumnMatch, params: Hashable) -> Outcome:
        assert isinstance(params, int)
        rows = params
        view, loop = match.view, match.loop
        e = Emitter(view)
        ok, step = e.fresh("ok"), e.fresh("s")
        wrappers = {g.id for g, wrapper in match.guards if wrapper}
        lines = [
            f"// cuda-agent: a block owns 32 adjacent columns, {rows} threads per column",
            f"bool {ok} = true;",
        ]
        parts = {r.var: e.fresh(f"part_{r.var}") for r in match.reductions}
        for r in match.reductions:
            lines.append(f"__shared__ {self._type(view, r)} {parts[r.var]}[{rows}][32];")
        for s in match.before:
            clause = s.child_by_field_name("condition")
            test = view.text(clause) if clause is not None else "(true)"
            if s.id in wrappers:
                lines.append(f"if (!{test}) {ok} = false;")
            elif any(s == g for g, _ in match.guards):
                lines.append(f"if {test} {ok} = false;")
            elif _reads_arrays(view, s):  # only where the guards hold (an invalid column reads nothing)
                decl = s.children_by_field_name("declarator")[0]
                name, value = decl.child_by_field_name("declarator"), decl.child_by_field_name("value")
                assert name is not None and value is not None
                kind = view.text(s.child_by_field_name("type") or s)
                lines.append(f"{kind} {view.text(name)}{{}};")
                lines.append(f"if ({ok}) {view.text(name)} = {view.text(value)};")
            else:
                lines.append(view.text(s))
        for r in match.reductions:
            if r.kind in ("sum", "prod"):
                lines.append(f"if (threadIdx.y != 0) {r.var} = {'0' if r.kind == 'sum' else '1'};")
        init = loop.node.child_by_field_name("initializer")
        cond = loop.node.child_by_field_name("condition")
        assert init is not None and cond is not None and loop.start is not None
        kind = view.text(init.child_by_field_name("type") or init)
        v = loop.var
        lines.append(f"if ({ok})")
        lines.append(
            f"{PAD}for ({kind} {v} = {view.text(loop.start)} + threadIdx.y; {view.text(cond)}; {v} += {rows})"
        )
        lines.append(PAD + PAD + view.text(loop.body).replace("\n", "\n" + PAD))
        for r in match.reductions:
            lines.append(f"{parts[r.var]}[threadIdx.y][threadIdx.x] = {r.var};")
        lines.append("__syncthreads();")
        lines.append(f"for (int {step} = {rows // 2}; {step} > 0; {step} >>= 1) {{")
        lines.append(f"{PAD}if (threadIdx.y < {step}) {{")
        for r in match.reductions:
            a = f"{parts[r.var]}[threadIdx.y][threadIdx.x]"
            b = f"{parts[r.var]}[threadIdx.y + {step}][threadIdx.x]"
            lines.append(f"{PAD}{PAD}{a} = {self._combine(r, a, b)};")
        lines.append(f"{PAD}}}")
        lines.append(f"{PAD}__syncthreads();")
        lines.append("}")
        for r in match.reductions:
            lines.append(f"{r.var} = {parts[r.var]}[0][threadIdx.x];")
        lines.append(f"if ({ok} && threadIdx.y == 0) {{")
        lines += [PAD + view.text(s) for s in match.after]
        lines.append("}")
        e.replace(view.body, "{\n" + "".join(f"{PAD}{line}\n" for line in lines) + "}")
        return e.rewrite(
            f"column reduction: 32 columns x {rows} rows of threads per block, shared-memory tree",
            LaunchChange(block=f"(32, {rows})"),
        )

    @staticmethod
    def _type(view: KernelView, r: Reduction) -> str:
        return " ".join(w for w in view.locals[r.var].type.split() if w not in ("const", "volatile"))

    @staticmethod
    def _combine(r: Reduction, a: str, b: str) -> str:
        if r.combine in ("+", "*"):
            return f"{a} {r.combine} {b}"
        if r.combine in (">", "<"):
            return f"({b} {r.combine} {a} ? {b} : {a})"
        return f"{r.combine}({a}, {b})"
