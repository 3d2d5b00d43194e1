"""Same-layout reduction: an interleaved-addressing shared-memory tree becomes sequential addressing.

Matches (on the :class:`~engine.view.KernelView`, by the pattern :data:`INTERLEAVED` of
:mod:`engine.patterns`) the loop of NVIDIA's first reduction kernel::

    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) X[tid] OP= X[tid + s];
        __syncthreads();
    }

with ``tid`` the thread index, ``X`` a ``__shared__`` array (``__shared__ T X[N]``, ``extern
__shared__ T X[]``, or a pointer from a wrapper of it: ``T* X = SharedMemory<T>();``) read after
the loop only at ``X[0]`` (where the block's result lies, in both forms), and a constant
power-of-two block of at least 64 threads; the bound may be ``blockDim.x`` or the block's size
under any name (``s < blockSize``, a template parameter).  The step may be any statement writing
``X[tid]`` from ``X[tid]`` and ``X[tid + s]``.  Its condition is judged by what it selects
(:meth:`~engine.maps.AccessMaps.selects`), not by its spelling: a test that holds exactly at the
threads whose ``threadIdx.x`` is a multiple of ``2 * s`` is the modulo form (``tid % (2 * s) ==
0``, ``idx % (s << 1) == 0`` over the global index of a block that is a multiple of ``2 * s``), and
a test that holds wherever the step runs at every size the spec verifies is no test.

Rewrite: the same steps with sequential addressing (``s`` from ``blockDim.x / 2`` down, active
threads ``tid < s``: whole warps retire, no bank conflicts; the loop's own bound, step and barrier
as the user wrote them), a tree the warp-shuffle pass
(:class:`~engine.warp_reduction.WarpReduction`) matches: the search composes the two
(:mod:`engine.compose`), its last five steps then warp shuffles.  The order of the
additions changes, the layout of the partial results does not.
"""

from __future__ import annotations

from dataclasses import dataclass

import tree_sitter

from engine import NotApplicable, Outcome, _constant_block
from engine.guards import split
from engine.passes import Emitter, Match, Pass
from engine.patterns import ANY, Assign, Bin, Captures, For, Poly, Var
from engine.view import KernelView, Loop, global_index, poly_add, poly_uniform, statements, walk
from engine.view import Poly as PolyValue

Node = tree_sitter.Node
_THREAD: dict[tuple[str, ...], int] = {("threadIdx.x",): 1}
# for (s = 1; s < BOUND; s *= 2) BODY   (or `s <<= 1`); the body is read by `_body`
INTERLEAVED = For(
    "s",
    start=Poly({(): 1}),
    cond=Bin("<", Var("s"), ANY @ "bound"),
    update=Assign("*=", Var("s"), Poly({(): 2})) | Assign("<<=", Var("s"), Poly({(): 1})),
    body=ANY @ "body",
)


@dataclass(frozen=True)
class TreeMatch(Match):
    loop: Loop
    tid: str  # the thread index as the kernel names it (``tid``, ``threadIdx.x``)
    step: Node  # the statement of one step
    bound: Node  # the loop's bound (``blockDim.x`` or the block's size under a name)
    barrier: Node  # the loop's barrier statement, kept as written
    near: PolyValue  # the index the step writes: ``tid`` (modulo form) or ``2 * s * tid`` (strided form)
    kept: tuple[Node, ...]  # the step's tail checks of the far element, kept with ``near`` -> ``tid``


class SameLayoutReduction(Pass[TreeMatch]):
    name = "SameLayoutReduction"
    space = ("sequential",)

    def match(self, view: KernelView) -> TreeMatch | NotApplicable:
        threads = _constant_block(view.subject)
        if threads is None or threads < 2 or threads & (threads - 1) or len(view.subject.block) != 1:
            return NotApplicable("the block is not a constant 1-D power of two")
        shared = set()
        for d in view.shared:  # `X[N]`, `X[]`, and `*X = SharedMemory<T>()`
            for n in d.children_by_field_name("declarator"):
                while n.type in ("init_declarator", "pointer_declarator", "array_declarator"):
                    inner = n.child_by_field_name("declarator")
                    if inner is None:
                        break
                    n = inner
                shared.add(view.text(n))
        block: tuple[PolyValue, ...] = ({("blockDim.x",): 1}, {(): threads})
        why = (
            "no `for (s = 1; s < blockDim.x; s *= 2) { if (tid % (2 * s) == 0) X[tid] += X[tid + s]; "
            "__syncthreads(); }` (or `index = 2 * s * tid; if (index < blockDim.x) X[index] += X[index + s];`) "
            "over a __shared__ array"
        )
        for loop in view.loops:
            caps = INTERLEAVED.match(view, loop.node, {})
            if caps is None or view.poly(caps["bound"]) not in block:
                continue
            found = self._tree(view, caps, shared, block)
            if isinstance(found, TreeMatch):
                return found
            why = found.reason
        return NotApplicable(why)

    @staticmethod
    def _tree(
        view: KernelView, caps: Captures, shared: set[str], block: tuple[PolyValue, ...]
    ) -> TreeMatch | NotApplicable:
        """The loop's body: index locals, ``if (ACTIVE && ...) STEP;`` and a barrier; the step
        writes ``X[near]`` of a ``__shared__`` array from ``X[near]`` and ``X[near + s]``, and only
        ``X[0]`` is read after the loop."""
        loop, s = caps["loop"], caps["s"]
        body = statements(caps["body"])
        if len(body) < 2 or not view.block_barrier(body[-1]) or body[-2].type != "if_statement":
            return NotApplicable(f"the body of the loop over `{s}` is not `if (...) STEP; BARRIER;`")
        guard = body[-2]
        if guard.child_by_field_name("alternative") is not None:
            return NotApplicable("the step has an `else`")
        for decl in body[:-2]:  # `int index = 2 * s * tid;`: dropped with the form they serve
            if decl.type != "declaration" or any(n.type in _EFFECTS for n in walk(decl)):
                return NotApplicable(f"`{view.text(decl)}` is not an index of the step")
        then = statements(guard.child_by_field_name("consequence") or guard)
        if len(then) != 1:
            return NotApplicable("the step is not one statement")
        step = then[0]
        clause = guard.child_by_field_name("condition")
        terms = split(view, clause.child_by_field_name("value") if clause is not None else None, "&&")
        free = frozenset({s})
        strided: PolyValue = {(s, "threadIdx.x"): 2}
        near: PolyValue | None = None
        kept = []
        for term in terms:
            if view.maps.selects(guard, term, loop, 2) is True:
                near = _THREAD  # `tid % (2 * s) == 0`, however spelled (the global index, a block multiple)
                continue
            op = view.text(term.children[1]) if term.type == "binary_expression" else ""
            left, right = term.child_by_field_name("left"), term.child_by_field_name("right")
            lp = view.poly(left, free) if left is not None else None
            rp = view.poly(right, free) if right is not None else None
            if op == "<" and lp == strided and rp in block:
                near = strided
                continue
            if op == "<" and rp in block and lp == {**strided, (s,): 1}:
                near = strided  # `index + s < blockDim.x`: with index a multiple of 2s, `index < blockDim.x`
                continue
            if op == "<" and rp in block and lp == {**_THREAD, (s,): 1}:
                continue  # the far element lies in the block: always so in the sequential form
            if op == "<" and lp is not None and rp is not None and poly_uniform(rp) and _far_global(lp, s):
                kept.append(
                    term
                )  # the far element exists (`i + s < n`): the same pairs are skipped in both forms
                continue
            if view.maps.selects(guard, term, loop, None) is True:
                continue  # true wherever the step runs, at every size the spec verifies: no test
            return NotApplicable(
                f"the step's condition `{view.text(term)}` is not one the sequential form keeps (a tail check "
                "that does not test the far element lets the tree read elements the block never loaded)"
            )
        if near is None:
            return NotApplicable(
                "the step is not run by the threads `tid % (2 * s) == 0` (or `2 * s * tid < blockDim.x`)"
            )
        inside = [a for a in view.accesses if step.start_byte <= a.node.start_byte < step.end_byte]
        indexed = [
            (a, view.poly(idx, free) if (idx := view._index_node(a.node)) is not None else None)
            for a in inside
        ]
        writes = [a for a, _ in indexed if a.written]
        if len(writes) != 1 or writes[0].array not in shared:
            return NotApplicable("the step does not write one __shared__ array")
        x = writes[0].array
        far = {**near, (s,): 1}
        if any(a.array != x or i not in (near, far) or (a.written and i != near) for a, i in indexed):
            return NotApplicable(f"the step reads or writes `{x}` elsewhere than `[near]` and `[near + {s}]`")
        if not any(i == far for _, i in indexed):
            return NotApplicable(f"the step never reads `{x}[near + {s}]`")
        after = [a for a in view.accesses if a.array == x and a.node.start_byte >= loop.node.end_byte]
        if any(a.index != {} for a in after):
            return NotApplicable(f"`{x}` is read after the loop elsewhere than `[0]`")
        return TreeMatch(view, loop, _thread_name(view), step, caps["bound"], body[-1], near, tuple(kept))

    def rewrite(self, match: TreeMatch, params: object) -> Outcome:
        view = match.view
        e = Emitter(view)
        loop = match.loop
        init = loop.node.child_by_field_name("initializer")
        assert init is not None
        kind = view.text(init.child_by_field_name("type") or init) if init.type == "declaration" else ""
        s, tid, ind = loop.var, match.tid, e.indent(loop.node)
        free = frozenset({s})

        def at_tid(node: Node) -> str:  # the step's text with its near index as the thread's
            if match.near == _THREAD:
                return view.text(node)
            return e.substitute(
                node,
                lambda n: (
                    tid
                    if n.type in ("identifier", "binary_expression", "parenthesized_expression")
                    and view.poly(n, free) == match.near
                    else None
                ),
            )

        cond = " && ".join([f"{tid} < {s}", *(at_tid(t) for t in match.kept)])
        head = f"{kind} {s}".strip()
        u = e.unit(loop.node, match.barrier)
        e.replace(
            loop.node,
            f"// cuda-agent: sequential addressing: active threads are contiguous, whole warps retire\n"
            f"{ind}for ({head} = {view.text(match.bound)} / 2; {s} > 0; {s} >>= 1) {{\n"
            f"{ind}{u}if ({cond}) {{\n"
            f"{ind}{u}{u}{at_tid(match.step)}\n"
            f"{ind}{u}}}\n"
            f"{ind}{u}{view.text(match.barrier)}\n"
            f"{ind}}}",
        )
        return e.rewrite("sequential-addressing tree reduction")


_EFFECTS = ("call_expression", "assignment_expression", "update_expression")


def _far_global(p: PolyValue, s: str) -> bool:
    """``p`` is the far element's global index plus a uniform part: ``blockIdx.x * blockDim.x +
    tid + s`` (the tail check ``i + s < n``)."""
    rest = poly_add(p, {**global_index("x"), (s,): 1}, -1)
    return poly_uniform(rest) and not any(s in m for m in rest)


def _thread_name(view: KernelView) -> str:
    """The kernel's name for ``threadIdx.x`` (a local assigned it once), else ``threadIdx.x``."""
    for name, loc in view.locals.items():
        if (
            loc.value is not None
            and not loc.reassigned
            and not loc.pointer
            and view.poly(loc.value) == _THREAD
        ):
            return name
    return "threadIdx.x"
