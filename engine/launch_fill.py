"""Launch fill: a kernel launched on a constant, under-filled grid (one block, often) whose threads
loop over the rows becomes a launch with a thread (or a warp, or a block) per row.

Matches (on the :class:`~engine.view.KernelView`) a kernel whose spec grid is a constant
and whose body is declarations that read no array followed by one loop over the rows
``for (T r = START; r < N; r += STEP)`` (or ``<=``; ``N`` a scalar parameter of the spec), the last
statement, the only place that reads the thread's position, in one of three forms:

- *threads stride*: ``START`` is ``threadIdx.x`` (or the global thread index) and ``STEP``
  ``blockDim.x`` (or ``blockDim.x * gridDim.x``); the loop's iterations are independent (no
  locals carried across them, no shared memory, barriers, atomics or shuffles, no ``break`` or
  ``continue`` of this loop);
- *serial*: ``START`` is a constant and ``STEP`` 1 on a launch of one thread (same conditions);
- *blocks stride*: ``START`` is ``blockIdx.x`` and ``STEP`` ``gridDim.x`` (the block cooperates on
  each row: shared memory and barriers are fine).

Rewrite (one value, ``"thread"``): the first two forms become ``r = START0 + blockIdx.x *
blockDim.x + threadIdx.x; if (r < N) { body }`` on a grid of ``cdiv(N - START0, block)`` blocks of
256 threads (the spec's block when it is wider than a warp) — a thread-per-row kernel, which a
later pass of the same candidate (:mod:`engine.compose`) turns into a warp or a block per
row (the row-parallel pass) or, when the rows are single elements, into packs (the vectorizer);
the blocks-stride form keeps its code and gets a grid of ``N`` blocks (its loop runs once per
block).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from cudasrc.launch import LaunchChange
from cudasrc.specs import ScalarSpec
from engine import _constant_product
from engine.passes import PAD, Emitter, Match, NotApplicable, Outcome, Pass, Transformed
from engine.view import POSITION, KernelView, Loop, Poly, statements, walk

Node = tree_sitter.Node
_LOOPS = ("for_statement", "while_statement", "do_statement")
_THREAD_START = ({("threadIdx.x",): 1}, {("threadIdx.x",): 1, ("blockDim.x", "blockIdx.x"): 1})
_THREAD_STEP = ({("blockDim.x",): 1}, {("blockDim.x", "gridDim.x"): 1})


@dataclass(frozen=True)
class FillMatch(Match):
    loop: Loop
    form: str  # "threads", "serial" or "blocks"
    start: str  # START0: the first row (C text; "0" for the threads form)
    rows: str  # the spec's expression for the number of rows, N - START0 (+1 for `<=`)
    dropped: tuple[Node, ...] = ()  # declarations only the loop's header read


class LaunchFill(Pass[FillMatch]):
    name = "LaunchFill"
    space = ("thread",)

    def match(self, view: KernelView) -> FillMatch | NotApplicable:
        subject = view.subject
        blocks, threads = _constant_product(subject.grid), _constant_product(subject.block)
        if blocks is None:
            return NotApplicable("the spec's grid is not a constant (the launch already follows the problem)")
        body = statements(view.body)
        if not body or body[-1].type != "for_statement":
            return NotApplicable("the body does not end with the loop over the rows")
        loop = view.loop_of(body[-1])
        assert loop is not None
        for s in body[:-1]:
            if s.type != "declaration" or any(
                s.start_byte <= a.node.start_byte < s.end_byte for a in view.accesses
            ):
                return NotApplicable(
                    f"`{view.text(s)}` before the loop is not a declaration that reads no array"
                )
        if not loop.var or loop.start is None or loop.op not in ("<", "<=") or loop.bound is None:
            return NotApplicable("the loop is not `for (T r = START; r < N; r += STEP)`")
        scalars = {a.name: a.value for a in subject.spec.args if isinstance(a, ScalarSpec)}
        n = view.text(loop.bound)
        if n not in scalars or n not in view.params:
            return NotApplicable(f"the loop bound `{n}` is not a scalar parameter of the spec")
        start, step = view.poly(loop.start), self._step(view, loop)
        update = loop.node.child_by_field_name("update")
        header = [x for x in (loop.start, update) if x is not None]
        used = {m for x in header for m in view.names(x)}
        # declarations only the loop's header reads (`int stride = blockDim.x * gridDim.x;`) go with it
        dropped = tuple(
            s
            for s in body[:-1]
            if self._declares(view, s) <= used and not self._read_outside(view, s, header)
        )
        positions = self._positions(view, [*header, *dropped])
        rows_of = f"{scalars[n]}{' + 1' if loop.op == '<=' else ''}"
        if start == {("blockIdx.x",): 1} and step == {("gridDim.x",): 1}:
            if {"blockIdx.x", "gridDim.x"} & positions:
                return NotApplicable("the body reads blockIdx.x or gridDim.x besides the loop over the rows")
            return FillMatch(view, loop, "blocks", "0", rows_of, dropped)
        if start in _THREAD_START and step in _THREAD_STEP:
            form, first = "threads", "0"
        elif start is not None and set(start) <= {()} and step == {(): 1} and blocks == 1 and threads == 1:
            form, first = "serial", view.text(loop.start)
            rows_of = rows_of if first == "0" else f"({rows_of}) - ({first})"
        else:
            return NotApplicable(
                "the loop is not over the rows by threads (`r = threadIdx.x; r += blockDim.x`), "
                "by blocks (`r = blockIdx.x; r += gridDim.x`) or serial on one thread"
            )
        if positions:
            return NotApplicable(f"the body reads {min(positions)} besides the loop over the rows")
        if view.cooperation:
            return NotApplicable(f"the threads of the loop cooperate ({view.cooperation})")
        if loop.carried:
            return NotApplicable(f"`{loop.carried[0].name}` is carried from one row to the next")
        for n_ in walk(loop.body):
            if n_.type in ("break_statement", "continue_statement") and self._owner(n_) == loop.node:
                return NotApplicable("the loop over the rows has a `break` or `continue`")
        return FillMatch(view, loop, form, first, rows_of, dropped)

    @staticmethod
    def _declares(view: KernelView, decl: Node) -> set[str]:
        out = set()
        for d in decl.children_by_field_name("declarator"):
            name = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            if name is not None:
                out.add(view.text(name))
        return out

    def _read_outside(self, view: KernelView, decl: Node, header: list[Node]) -> bool:
        """Whether a name ``decl`` declares is read outside it and outside the loop's header."""
        names = self._declares(view, decl)
        skip = [decl, *header]
        return any(
            n.type == "identifier"
            and view.text(n) in names
            and not any(x.start_byte <= n.start_byte < x.end_byte for x in skip)
            for n in view.nodes
        )

    @staticmethod
    def _positions(view: KernelView, skip: list[Node]) -> set[str]:
        """The thread positions the body reads outside the nodes ``skip``."""
        out = set()
        for n in view.nodes:
            if n.type == "field_expression" and not any(
                x.start_byte <= n.start_byte < x.end_byte for x in skip
            ):
                arg = n.child_by_field_name("argument")
                if arg is not None and view.text(arg) in POSITION:
                    out.add(view.text(n).replace(" ", ""))
        return out

    @staticmethod
    def _owner(n: Node) -> Node | None:
        up = n.parent
        while up is not None and up.type not in (*_LOOPS, "switch_statement"):
            up = up.parent
        return up

    @staticmethod
    def _step(view: KernelView, loop: Loop) -> Poly | None:
        if loop.step is not None:
            return {(): loop.step}
        update = loop.node.child_by_field_name("update")
        if update is None or update.type != "assignment_expression" or view.text(update.children[1]) != "+=":
            return None
        right = update.child_by_field_name("right")
        return view.poly(right) if right is not None else None

    def rewrite(self, match: FillMatch, params: Hashable) -> Outcome:
        view, loop = match.view, match.loop
        if match.form == "blocks":
            return Transformed(view.subject.code, "a block per row", LaunchChange(grid=match.rows))
        e = Emitter(view)
        for d in match.dropped:
            e.replace(d, "")
        init = loop.node.child_by_field_name("initializer")
        assert init is not None
        kind = view.text(init.child_by_field_name("type") or init)
        first = "" if match.start == "0" else f"{match.start} + "
        cond = loop.node.child_by_field_name("condition")
        assert cond is not None
        e.replace(
            loop.node,
            f"// cuda-agent: a thread per row (the launch had {'one thread' if match.form == 'serial' else 'a fixed grid'})\n"
            f"{e.indent(loop.node)}{kind} {loop.var} = {first}blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"{e.indent(loop.node)}if ({view.text(cond)}) "
            + view.text(loop.body).replace(
                "\n", "\n" + (PAD if loop.body.type != "compound_statement" else "")
            ),
        )
        threads = _constant_product(view.subject.block) or 1
        block = str(threads) if threads >= 64 and len(view.subject.block) == 1 else "256"
        launch = LaunchChange(grid=f"cdiv({match.rows}, block)", block=block)
        return e.rewrite("a thread per row", launch)
