"""Block scan with warp shuffles: a Hillis-Steele inclusive scan over a block's shared array becomes
a scan within each warp by ``__shfl_up_sync``, the warps' totals scanned by the first warp.

Matches (on the :class:`~engine.view.KernelView`) on a constant 1-D block of ``B``
threads (a multiple of 32, at most 1024) a loop

    for (int s = 1; s < B; s <<= 1) {          // or s *= 2, s += s; bound blockDim.x, B or a
                                               // parameter whose value is B (n, the block's elements)
        T t = tid >= s ? X[tid - s] : 0;       // or if (tid >= s) t = X[tid - s]; (t declared anywhere)
        __syncthreads();
        X[tid] += t;                           // or X[tid] = X[tid] + t, under tid >= s or not
        __syncthreads();
    }

with ``X`` a ``__shared__`` array and ``tid`` the thread index: inside the loop ``X`` is written
only at ``[tid]`` by a sum and read only at ``[tid - s]`` (under a condition ``tid >= s``, any
spelling) or at ``[tid]``; the loop writes no other array.  After it, ``X[tid]`` holds the
inclusive sum of ``X[0..tid]`` as it was before the loop.

It also matches the double-buffered form (GPU Gems 3, ch. 39; any 1-D block, ``X`` of any stride
``S``)::

    for (int offset = 1; offset < n; offset *= 2) {   // or <= blockDim.x / 2; *= 2, <<= 1
        pout = 1 - pout; pin = 1 - pout;            // or pin = 1 - pin; or int pin = pout; pout = 1 - pout;
        if (tid >= offset) X[pout * S + tid] = X[pin * S + tid] + X[pin * S + tid - offset];
        else X[pout * S + tid] = X[pin * S + tid];  // or X[pout*S+tid] = X[pin*S+tid]; if (...) ... += ...;
        __syncthreads();
    }

decided by running the body once per case (``tid >= offset`` or not) over which reads the new
element sums, whatever the statements' spelling; after the loop ``X`` is read only in the buffer
``pout``.  The rewrite scans ``X[pout * S + tid]`` with warp shuffles (a block of any size: the last
warp may be partial), sets ``pout``/``pin`` as the loop leaves them and stores the scan there;
where the loop's bound or the stride are not the block (``offset < n``, ``S = n``) it does so only
when the loop covers the block (every power of two below ``blockDim.x`` runs and ``S >=
blockDim.x``, decided at run time) and runs the original loop otherwise.

Rewrite (params: ``"shuffle"``): the loop becomes: ``v = X[tid]``; five ``__shfl_up_sync`` steps
scan each warp; the last lane of each warp stores the warp's total in ``__shared__ T
totals[32]``; the first warp scans the totals the same way; each thread adds the total of the
warps before it and stores ``X[tid] = v`` (a barrier after, as the loop ended with one).  The
order of the additions changes (floating-point sums may differ in the last bits).
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import tree_sitter

from cudasrc.specs import InvalidSpec
from engine.guards import at_least_zero, at_problems, conjuncts, constant_block, guards, value
from engine.passes import PAD, Emitter, Match, NotApplicable, Outcome, Pass
from engine.view import (
    Expander,
    KernelView,
    Loop,
    Poly,
    global_index,
    poly_add,
    poly_render,
    poly_split,
    poly_uniform,
    statements,
    unparenthesized,
    walk,
)

Node = tree_sitter.Node
_DOUBLING = {("<<=", "1"), ("*=", "2")}


@dataclass(frozen=True)
class ScanMatch(Match):
    loop: Loop
    array: str  # the shared array X
    elem: str  # its element type
    tid: str  # the thread index as the loop writes it (C text)
    threads: int


@dataclass(frozen=True)
class BufferedScan(Match):
    """The double-buffered form: ``X[pout * S + tid]`` scanned, ``pout``/``pin`` swapped per step."""

    loop: Loop
    array: str
    elem: str
    out_var: str  # pout: the buffer each step writes
    in_var: str  # pin: the buffer each step reads
    stride: str  # S (C text)
    flips: tuple[Node, ...]  # the statements that swap the buffers, as written
    entry: tuple[str, ...]  # the buffer variables declared before the loop (restored for the fallback)
    checked: bool  # the loop covers the block only at run time: keep it as the fallback
    barrier: Node  # a barrier of the loop, as written


@dataclass(frozen=True)
class NaivePrefix(Match):
    """A thread-per-output prefix sum: ``acc`` adds ``in[0..i]`` for the thread's global index ``i``
    (``for (j = 0; j <= i; ++j) acc += in[j];`` or ``for (o = 0; o < L; ++o) if (i - o >= 0) acc +=
    in[i - o];``, the latter a whole prefix only where ``i < L``)."""

    loop: Loop
    acc: str
    array: str
    elem: str
    active: tuple[Node, ...]  # the guards of the threads that run the loop (``i < n``)
    bound: Node | None  # the window ``L`` of the offset form (None: the whole prefix always)
    statement: Node  # the kernel's top-level statement that holds the loop
    covered: bool  # the guards keep ``i < L``: no thread needs the window
    limits: tuple[str, ...]  # the guards' bounds of ``i`` (C text): no element at or past them is read


class BlockScan(Pass[ScanMatch | BufferedScan | NaivePrefix]):
    name = "BlockScan"
    space = ("shuffle",)

    def match(self, view: KernelView) -> ScanMatch | BufferedScan | NaivePrefix | NotApplicable:
        block = constant_block(view)
        if block is not None and (len(block) != 1 or block[0] > 1024):
            return NotApplicable("the block is not 1-D")
        if len(view.loops) == 1 and not view.cooperation and len(view.subject.block) == 1:
            naive = _naive(view, view.loops[0])
            if naive is not None:
                return naive
        threads = block[0] if block is not None else 0
        shared = self._shared(view)
        why = "no Hillis-Steele scan loop `for (s = 1; s < blockDim.x; s <<= 1)` over a __shared__ array"
        for loop in view.loops:
            found: ScanMatch | BufferedScan | NotApplicable | None = _buffered(view, loop, shared)
            if found is None and threads and threads % 32 == 0:
                found = self._scan(view, loop, shared, threads)
            if isinstance(found, ScanMatch | BufferedScan):
                return found
            if found is not None:
                why = found.reason
        if (not threads or threads % 32) and why.startswith("no Hillis-Steele"):
            why += " (a single-buffered scan needs a constant block of a multiple of 32 threads)"
        return NotApplicable(why)

    @staticmethod
    def _shared(view: KernelView) -> dict[str, str]:
        """The block's ``__shared__`` arrays: name -> element type."""
        out = {}
        for d in view.shared:
            ty = d.child_by_field_name("type")
            for n in d.children_by_field_name("declarator"):
                if n.type == "array_declarator":
                    name = n.child_by_field_name("declarator")
                    if name is not None and ty is not None:
                        out[view.text(name)] = view.text(ty)
        return out

    def _scan(
        self, view: KernelView, loop: Loop, shared: dict[str, str], threads: int
    ) -> ScanMatch | NotApplicable | None:
        s = loop.var
        update = loop.node.child_by_field_name("update")
        if (
            not s
            or loop.start is None
            or view.text(loop.start) != "1"
            or update is None
            or loop.bound is None
        ):
            return None
        right = update.child_by_field_name("right")
        step = (view.text(update.children[1]), view.text(right)) if right is not None else ("", "")
        if step not in _DOUBLING and not (step[0] == "+=" and step[1] == s):
            return None
        inside = [a for a in view.accesses if loop.node.start_byte <= a.node.start_byte < loop.node.end_byte]
        free = frozenset({s})
        expand = view.expander(free)
        tid: dict[tuple[str, ...], int] = {("threadIdx.x",): 1}
        back = poly_add(tid, {(s,): 1}, -1)
        arrays = {a.array for a in inside if a.written}
        if len(arrays) != 1 or next(iter(arrays)) not in shared:
            return NotApplicable("the scan loop writes something other than one __shared__ array")
        x = arrays.pop()
        writes = [a for a in inside if a.written]
        if elsewhere := next((a for a in writes if a.index != tid), None):
            return NotApplicable(
                f"the scan loop writes `{view.text(elsewhere.node)}`, not `{x}[tid]`: no Hillis-Steele "
                "step (a work-efficient up- or down-sweep is not rewritten)"
            )
        if any(not self._adds(view, a.node) for a in writes):
            return NotApplicable(f"the scan loop does not add into `{x}[tid]`")
        if loop.op != "<" or not _over_block(view, view.poly(loop.bound), threads):
            return NotApplicable(f"the scan loop does not run while `{s} < blockDim.x`")
        for a in inside:
            if a.array != x or a.written:
                continue
            if a.index == back:
                facts = [at_least_zero(expand, view, t) for t in conjuncts(view, a.node, loop.body)]
                if back not in facts:
                    return NotApplicable(f"`{view.text(a.node)}` is read without `tid >= {s}`")
            elif a.index != tid:
                return NotApplicable(f"`{view.text(a.node)}` is not read at `[tid - {s}]`")
        if not any(a.array == x and a.index == back for a in inside):
            return NotApplicable(f"the scan loop never reads `{x}[tid - {s}]`")
        idx = view._index_node(writes[0].node)
        assert idx is not None
        return ScanMatch(view, loop, x, shared[x], view.text(idx), threads)

    @staticmethod
    def _adds(view: KernelView, sub: Node) -> bool:
        """Whether the write ``sub`` is ``sub += e`` or ``sub = sub + e`` / ``e + sub``."""
        parent = sub.parent
        if parent is None or parent.type != "assignment_expression":
            return False
        op = view.text(parent.children[1])
        if op == "+=":
            return True
        right = unparenthesized(parent.child_by_field_name("right"))
        if (
            op != "="
            or right is None
            or right.type != "binary_expression"
            or view.text(right.children[1]) != "+"
        ):
            return False
        sides = (
            unparenthesized(right.child_by_field_name("left")),
            unparenthesized(right.child_by_field_name("right")),
        )
        return any(side is not None and view.tokens(side) == view.tokens(sub) for side in sides)

    def rewrite(self, match: ScanMatch | BufferedScan | NaivePrefix, params: Hashable) -> Outcome:
        if isinstance(match, BufferedScan):
            return _buffered_rewrite(match)
        if isinstance(match, NaivePrefix):
            return _prefix_rewrite(match)
        view = match.view
        e = Emitter(view)
        v, o, n, lane, warp, totals, w = (
            e.fresh("v"),
            e.fresh("o"),
            e.fresh("n"),
            e.fresh("lane"),
            e.fresh("warp"),
            e.fresh("totals"),
            e.fresh("w"),
        )
        t, x, tid, warps = match.elem, match.array, match.tid, match.threads // 32
        ind = e.indent(match.loop.node)
        lines = [
            "{  // cuda-agent: inclusive block scan with warp shuffles",
            f"{PAD}__shared__ {t} {totals}[32];",
            f"{PAD}const int {lane} = threadIdx.x % 32, {warp} = threadIdx.x / 32;",
            f"{PAD}{t} {v} = {x}[{tid}];",
            "#pragma unroll",
            f"{PAD}for (int {o} = 1; {o} < 32; {o} <<= 1) {{",
            f"{PAD}{PAD}const {t} {n} = __shfl_up_sync(0xffffffffu, {v}, {o});",
            f"{PAD}{PAD}if ({lane} >= {o}) {v} += {n};",
            f"{PAD}}}",
            f"{PAD}if ({lane} == 31) {totals}[{warp}] = {v};",
            f"{PAD}__syncthreads();",
            f"{PAD}if ({warp} == 0) {{",
            f"{PAD}{PAD}{t} {w} = {lane} < {warps} ? {totals}[{lane}] : ({t})0;",
            "#pragma unroll",
            f"{PAD}{PAD}for (int {o} = 1; {o} < 32; {o} <<= 1) {{",
            f"{PAD}{PAD}{PAD}const {t} {n} = __shfl_up_sync(0xffffffffu, {w}, {o});",
            f"{PAD}{PAD}{PAD}if ({lane} >= {o}) {w} += {n};",
            f"{PAD}{PAD}}}",
            f"{PAD}{PAD}if ({lane} < {warps}) {totals}[{lane}] = {w};",
            f"{PAD}}}",
            f"{PAD}__syncthreads();",
            f"{PAD}if ({warp} > 0) {v} += {totals}[{warp} - 1];",
            f"{PAD}{x}[{tid}] = {v};",
            f"{PAD}__syncthreads();",
            "}",
        ]
        e.replace(
            match.loop.node, lines[0] + "".join(f"\n{'' if s.startswith('#') else ind}{s}" for s in lines[1:])
        )
        return e.rewrite(f"inclusive block scan of {x} with warp shuffles ({match.threads} threads)")


# --------------------------------------------------------------------------- the double-buffered form


def _flip(view: KernelView, stmt: Node) -> tuple[str, str, bool] | None:
    """``a = 1 - b;`` (``T a = 1 - b;``) as ``(a, b, True)``, ``T a = b;`` as ``(a, b, False)``."""
    target = value = None
    if stmt.type == "expression_statement" and stmt.named_child_count == 1:
        e = stmt.named_children[0]
        if e.type == "assignment_expression" and view.text(e.children[1]) == "=":
            target, value = e.child_by_field_name("left"), e.child_by_field_name("right")
    elif stmt.type == "declaration" and len(stmt.children_by_field_name("declarator")) == 1:
        d = stmt.children_by_field_name("declarator")[0]
        if d.type == "init_declarator":
            target, value = d.child_by_field_name("declarator"), d.child_by_field_name("value")
    value = unparenthesized(value)
    if target is None or value is None or target.type != "identifier":
        return None
    if value.type == "identifier" and stmt.type == "declaration":
        return view.text(target), view.text(value), False
    if value.type != "binary_expression" or view.text(value.children[1]) != "-":
        return None
    one, other = (unparenthesized(value.child_by_field_name(f)) for f in ("left", "right"))
    if one is None or other is None or view.text(one) != "1" or other.type != "identifier":
        return None
    return view.text(target), view.text(other), True


def _buffered(view: KernelView, loop: Loop, shared: dict[str, str]) -> BufferedScan | NotApplicable | None:
    """The double-buffered Hillis-Steele loop (see the module docstring), or None when ``loop`` is
    not one, or why it is one that cannot be rewritten."""
    s = loop.var
    update = loop.node.child_by_field_name("update")
    right = update.child_by_field_name("right") if update is not None else None
    step = (
        (view.text(update.children[1]), view.text(right))
        if update is not None and right is not None
        else ("", "")
    )
    body = statements(loop.body)
    flips = []
    for stmt in body:
        f = _flip(view, stmt)
        if f is None:
            break
        flips.append((stmt, f))
    if (
        not s
        or not flips
        or loop.start is None
        or view.poly(loop.start) != {(): 1}
        or (step not in _DOUBLING and step != ("+=", s))
        or loop.op not in ("<", "<=")
        or loop.bound is None
    ):
        return None
    # the buffer variables, each as (entry variable, negated) of the values they held at the step's start
    state: dict[str, tuple[str, bool]] = {}
    for _, (dst, src, negate) in flips:
        base, neg = state.get(src, (src, False))
        state[dst] = (base, neg != negate)
    name = f"`{view.text(loop.node).split(')')[0]})`"
    inside = [a for a in view.accesses if loop.node.start_byte <= a.node.start_byte < loop.node.end_byte]
    written = {a.array for a in inside if a.written}
    if len(written) != 1 or next(iter(written)) not in shared:
        return NotApplicable(
            f"the double-buffered loop {name} writes something other than one __shared__ array"
        )
    x = written.pop()
    free = frozenset({s, *state, *(b for b, _ in state.values())})
    expand = view.expander(free)
    tid: dict[tuple[str, ...], int] = {("threadIdx.x",): 1}
    outs = [v for v, (base, neg) in state.items() if neg and base == v]  # pout = 1 - pout
    ins = [v for v, (base, neg) in state.items() if outs and base == outs[0] and not neg and v != outs[0]]
    if len(outs) != 1 or len(ins) != 1:
        return NotApplicable(f"{name} does not swap two buffers (`pout = 1 - pout; pin = 1 - pout;`)")
    p, q = outs[0], ins[0]
    declared_in_loop = {v for stmt, (v, _, _) in flips if stmt.type == "declaration"}
    entry = tuple(v for v in (p, q) if v not in declared_in_loop)
    if state.get(q, ("", True))[0] != p and q in entry:
        return NotApplicable(f"`{q}` is not `1 - {p}` after the swap")
    if q in entry:  # pin = 1 - pin: the entry values must be complements (int pout = 0, pin = 1)
        if state[q] != (q, True) and state[q] != (p, False):
            return NotApplicable(f"`{q}` is not `1 - {p}` after the swap")
        if state[q] == (q, True) and not _complements(view, p, q, loop):
            return NotApplicable(f"`{p}` and `{q}` do not start as complements")
    for v in entry:  # the loop's swaps are the only assignments of the buffer variables
        loc = view.locals.get(v)
        if loc is None:
            return NotApplicable(f"`{v}` is not a local")
        for n in view.nodes:
            if n.type in ("assignment_expression", "update_expression"):
                t = unparenthesized(n.child_by_field_name("left") or n.child_by_field_name("argument"))
                ours = any(_inside(n, st) for st, _ in flips)
                late_init = loc.value is None and n.start_byte < loop.node.start_byte
                if t is not None and view.text(t) == v and not ours and not late_init:
                    return NotApplicable(f"`{v}` is assigned outside the loop's swap")
    stride: dict[tuple[str, ...], int] | None = None
    kinds: dict[int, str] = {}
    for a in inside:
        if a.array != x:
            continue
        idx = view._index_node(a.node)
        index = expand.poly(idx) if idx is not None else None
        if index is None:
            return NotApplicable(f"no canonical index in `{view.text(a.node)}`")
        var = p if a.written else q
        coeff, rest = poly_split(index, var)
        other = poly_split(rest, q if a.written else p)[0]
        if not coeff or other or not poly_uniform(coeff) or any(t in m for m in coeff for t in free):
            return NotApplicable(f"`{view.text(a.node)}` is not in the buffer `{var}` at `{var} * S + tid`")
        if stride is not None and coeff != stride:
            return NotApplicable("the buffers' stride differs between accesses")
        stride = coeff
        if rest == tid:
            kinds[a.node.id] = "w" if a.written else "r1"
        elif rest == poly_add(tid, {(s,): 1}, -1) and not a.written:
            kinds[a.node.id] = "r2"
        else:
            return NotApplicable(f"`{view.text(a.node)}` is not at `tid` or `tid - {s}`")
    if stride is None or "r2" not in kinds.values():
        return NotApplicable(f"{name} never reads `{x}[{q} * S + tid - {s}]`")
    sums = _run(view, expand, body[len(flips) :], kinds, s)
    if isinstance(sums, NotApplicable):
        return sums
    if sums != {True: ("r1", "r2"), False: ("r1",)}:
        return NotApplicable(f"{name} does not add `{x}[tid - {s}]` to `{x}[tid]` where `tid >= {s}`")
    where = _placed(view, loop)
    if where:
        return NotApplicable(where)
    for a in view.accesses:  # after the loop: only the buffer `pout`
        if a.array != x or a.node.start_byte < loop.node.end_byte:
            continue
        idx = view._index_node(a.node)
        index = expand.poly(idx) if idx is not None else None
        if index is None or poly_split(index, p)[0] != stride or poly_split(index, q)[0]:
            return NotApplicable(f"`{view.text(a.node)}` after the loop does not read the buffer `{p}`")
    barriers = [n for n in view.barriers if _inside(n, loop.node) and view.block_barrier(n)]
    if not barriers:
        return NotApplicable(f"{name} has no barrier")
    bound = view.poly(loop.bound, frozenset({s}))
    block: dict[tuple[str, ...], int] = {("blockDim.x",): 1}
    checked = not (stride == block and loop.op == "<" and bound == block)
    return BufferedScan(
        view,
        loop,
        x,
        shared[x],
        p,
        q,
        poly_render(stride, expand.atoms, False),
        tuple(st for st, _ in flips),
        entry,
        checked,
        barriers[0],
    )


def _over_block(view: KernelView, bound: Poly | None, threads: int) -> bool:
    """Whether ``bound`` is the block's thread count: ``blockDim.x``, the spec's constant block, or
    scalar parameters whose values are the block's size at every problem of the spec (``s < n``
    with ``n`` the block's element count, one per thread)."""
    if bound in ({("blockDim.x",): 1}, {(): threads}):
        return True
    try:
        problems = at_problems(view)
    except InvalidSpec:
        return False
    return bound is not None and all(value(bound, env) == launch.block[0] for launch, env in problems)


def _inside(node: Node, outer: Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _complements(view: KernelView, p: str, q: str, loop: Loop) -> bool:
    """``p`` and ``q`` are declared with constant values ``c`` and ``1 - c``."""
    vals = []
    for v in (p, q):
        loc = view.locals.get(v)
        value = view.poly(loc.value) if loc is not None and loc.value is not None else None
        if value is None or set(value) - {()}:
            return False
        vals.append(value.get((), 0))
    return vals[0] + vals[1] == 1 and vals[0] in (0, 1)


def _placed(view: KernelView, loop: Loop) -> str:
    """Why the block's threads may not all run ``loop`` together ("" when they do): the loop must
    be a statement of the kernel's body itself, with no ``return`` before or in it."""
    if loop.node.parent != view.body:
        return "the scan loop is inside a condition or another loop: the warp shuffles need every thread"
    if any(r.start_byte < loop.node.end_byte for r in view.returns):
        return "a `return` before the scan loop: the warp shuffles need every thread"
    return ""


def _run(
    view: KernelView, expand: Expander, stmts: list[Node], kinds: dict[int, str], s: str
) -> dict[bool, tuple[str, ...]] | NotApplicable:
    """What the new element ``X[pout * S + tid]`` sums after ``stmts`` (the loop body past the
    swap), in either case of ``tid >= s``: the reads (``r1``: the old element, ``r2``: the one ``s``
    before) it adds, sorted."""
    out = {}
    for case in (True, False):
        run = _Run(view, expand, kinds, s, case)
        why = run.block(stmts)
        if why:
            return NotApplicable(why)
        if run.value is None:
            return NotApplicable("the scan loop does not set the new element")
        out[case] = tuple(sorted(run.value))
    return out


class _Run:
    """One thread's step of the double-buffered loop, where ``tid >= s`` is ``case``."""

    def __init__(self, view: KernelView, expand: Expander, kinds: dict[int, str], s: str, case: bool) -> None:
        self.view, self.expand, self.kinds, self.s, self.case = view, expand, kinds, s, case
        self.cond = poly_add({("threadIdx.x",): 1}, {(s,): 1}, -1)  # tid - s >= 0
        self.value: list[str] | None = None

    def block(self, nodes: list[Node]) -> str:
        """Why ``nodes`` are not steps of the scan ("" when they are); the sum in ``value``."""
        view = self.view
        for st in nodes:
            if st.type == "compound_statement":
                why = self.block(statements(st))
            elif view.block_barrier(st) or st.type == "comment":
                why = ""
            elif st.type == "declaration":
                why = (
                    f"`{view.text(st)}` reads the buffer" if any(n.id in self.kinds for n in walk(st)) else ""
                )
            elif st.type == "if_statement":
                why = self.branch(st)
            elif st.type == "expression_statement" and st.named_child_count == 1:
                why = self.step(st.named_children[0])
            else:
                why = f"`{view.text(st).splitlines()[0]}` is not a step of the scan"
            if why:
                return why
        return ""

    def branch(self, st: Node) -> str:
        view = self.view
        clause = st.child_by_field_name("condition")
        test = unparenthesized(clause.child_by_field_name("value") if clause is not None else None)
        holds = None
        for neg in (False, True):
            if test is not None and at_least_zero(self.expand, view, test, neg) == self.cond:
                holds = self.case != neg
        if holds is None:
            return f"`{view.text(st).splitlines()[0]}` does not test `tid >= {self.s}`"
        taken = st.child_by_field_name("consequence" if holds else "alternative")
        if taken is not None and taken.type == "else_clause":
            taken = taken.named_children[-1] if taken.named_children else None
        return self.block([taken]) if taken is not None else ""

    def step(self, e: Node) -> str:
        view = self.view
        left = unparenthesized(e.child_by_field_name("left")) if e.type == "assignment_expression" else None
        op = view.text(e.children[1]) if left is not None else ""
        if left is None or self.kinds.get(left.id) != "w" or op not in ("=", "+="):
            return f"`{view.text(e)}` is not a step of the scan"
        terms = _terms(view, e.child_by_field_name("right"), self.kinds)
        if terms is None:
            return f"`{view.text(e)}` does not add elements of the buffer"
        if op == "+=" and self.value is None:
            return f"`{view.text(e)}` adds to an element the step has not set"
        self.value = (self.value or []) + terms if op == "+=" else terms
        return ""


def _terms(view: KernelView, node: Node | None, kinds: dict[int, str]) -> list[str] | None:
    """The reads of the buffer a sum ``a + b + ...`` adds (``r1``/``r2``), None when it is not one."""
    node = unparenthesized(node)
    if node is None:
        return None
    if node.type == "binary_expression" and view.text(node.children[1]) == "+":
        a = _terms(view, node.child_by_field_name("left"), kinds)
        b = _terms(view, node.child_by_field_name("right"), kinds)
        return a + b if a is not None and b is not None else None
    kind = kinds.get(node.id)
    return [kind] if kind in ("r1", "r2") else None


def _buffered_rewrite(match: BufferedScan) -> Outcome:
    view, loop = match.view, match.loop
    e = Emitter(view)
    ind = e.indent(loop.node)
    u = e.unit(loop.node, match.barrier.parent if match.barrier.parent is not None else match.barrier)
    t, x, p = match.elem, match.array, match.out_var
    stride = match.stride if match.stride.replace("_", "").replace(".", "").isalnum() else f"({match.stride})"
    bar = view.text(match.barrier) + ("" if view.text(match.barrier).endswith(";") else ";")
    v = e.fresh("v")
    head = view.text(loop.node)[: loop.body.start_byte - loop.node.start_byte].rstrip()
    flips = " ".join(view.text(f) for f in match.flips)
    scan = _warp_scan(e, t, v, u, bar)
    lines = ["// cuda-agent: the double-buffered scan as a work-efficient block scan (warp shuffles)", "{"]
    if match.checked:
        saved = {var: e.fresh(f"{var}0") for var in match.entry}
        reach = e.fresh("reach")
        lines += [
            *(f"{u}const int {saved[var]} = {var};" for var in match.entry),
            f"{u}unsigned {reach} = 0;  // the largest step the loop takes",
            f"{u}{head} {{ {flips} {reach} = {loop.var}; }}",
            f"{u}if (2 * {reach} >= blockDim.x && {stride} >= blockDim.x) {{  // the loop scans the whole block",
            f"{u}{u}{t} {v} = {x}[{saved.get(p, p)} * {stride} + threadIdx.x];",
            *(f"{u}{u}{line}" for line in scan),
            f"{u}{u}{x}[{p} * {stride} + threadIdx.x] = {v};",
            f"{u}{u}{bar}",
            f"{u}}} else {{",
            *(f"{u}{u}{var} = {saved[var]};" for var in match.entry),
            *(f"{u}{u}{line}" if line.strip() else "" for line in _dedented(view, loop.node)),
            f"{u}}}",
        ]
    else:
        lines += [
            f"{u}{t} {v} = {x}[{p} * {stride} + threadIdx.x];",
            *(f"{u}{line}" for line in scan),
            f"{u}{head} {{ {flips} }}  // the buffers as the loop leaves them",
            f"{u}{x}[{p} * {stride} + threadIdx.x] = {v};",
            f"{u}{bar}",
        ]
    lines.append("}")
    e.replace(loop.node, "\n".join(lines[:1] + [ind + line if line.strip() else "" for line in lines[1:]]))
    return e.rewrite(f"double-buffered scan of {x} as a block scan with warp shuffles")


def _dedented(view: KernelView, node: Node) -> list[str]:
    """``node``'s lines with the indentation of its first line taken off every line."""
    first = view.subject.doc.line_bytes(node.start_point.row).decode("utf-8", errors="replace")
    cut = len(first) - len(first.lstrip())
    return [line[cut:] if line[:cut].strip() == "" else line.lstrip() for line in view.text(node).split("\n")]


def _warp_scan(e: Emitter, t: str, v: str, u: str, bar: str) -> list[str]:
    """Lines that turn each thread's ``v`` into the inclusive sum of ``v`` over the block's threads
    up to it, for a 1-D block of any size (the last warp may be partial): ``__shfl_up_sync`` within
    each warp, the warps' totals scanned by the first warp through shared memory."""
    o, n, lane, warp, warps, lanes, mask, totals, w = (
        e.fresh(stem) for stem in ("o", "n", "lane", "warp", "warps", "lanes", "mask", "totals", "w")
    )
    return [
        f"__shared__ {t} {totals}[32];",
        f"const unsigned {lane} = threadIdx.x % 32, {warp} = threadIdx.x / 32, {warps} = (blockDim.x + 31) / 32;",
        f"const unsigned {lanes} = blockDim.x - {warp} * 32 < 32 ? blockDim.x - {warp} * 32 : 32;  // the last warp may be partial",
        f"const unsigned {mask} = {lanes} == 32 ? 0xffffffffu : (1u << {lanes}) - 1u;",
        f"for (unsigned {o} = 1; {o} < 32; {o} <<= 1) {{",
        f"{u}const {t} {n} = __shfl_up_sync({mask}, {v}, {o});",
        f"{u}if ({lane} >= {o}) {v} += {n};",
        "}",
        f"if ({lane} == {lanes} - 1) {totals}[{warp}] = {v};",
        bar,
        f"if ({warp} == 0) {{",
        f"{u}{t} {w} = {lane} < {warps} ? {totals}[{lane}] : ({t})0;",
        f"{u}for (unsigned {o} = 1; {o} < 32; {o} <<= 1) {{",
        f"{u}{u}const {t} {n} = __shfl_up_sync({mask}, {w}, {o});",
        f"{u}{u}if ({lane} >= {o}) {w} += {n};",
        f"{u}}}",
        f"{u}if ({lane} < {warps}) {totals}[{lane}] = {w};",
        "}",
        bar,
        f"if ({warp} > 0) {v} += {totals}[{warp} - 1];",
        f"{bar}  // {totals} is free again",
    ]


# --------------------------------------------------------------------------- the thread-per-output prefix


def _naive(view: KernelView, loop: Loop) -> NaivePrefix | NotApplicable | None:
    """The thread-per-output prefix sum (:class:`NaivePrefix`), None when ``loop`` is no prefix."""
    sums = [c for c in loop.carried if c.reduction is not None and c.reduction.kind == "sum"]
    body = statements(loop.body)
    while len(body) == 1 and body[0].type == "compound_statement":
        body = statements(body[0])
    if len(loop.carried) != 1 or len(sums) != 1 or len(body) != 1 or loop.step != 1 or loop.start is None:
        return None
    acc = sums[0].name
    stmt, cond = body[0], None
    if stmt.type == "if_statement" and stmt.child_by_field_name("alternative") is None:
        clause = stmt.child_by_field_name("condition")
        cond = unparenthesized(clause.child_by_field_name("value") if clause is not None else None)
        inner = statements(stmt.child_by_field_name("consequence") or stmt)
        if len(inner) != 1:
            return None
        stmt = inner[0]
    reads = [a for a in view.accesses if _inside(a.node, stmt)]
    if len(reads) != 1 or reads[0].written or reads[0].array not in view.params or reads[0].index is None:
        return None
    read = reads[0]
    if any(a.written and a.array == read.array for a in view.accesses):
        return None
    g = global_index("x")
    o = loop.var
    idx = view.poly(view._index_node(read.node), frozenset({o}))  # type: ignore[arg-type]
    start = view.poly(loop.start)
    bound = view.poly(loop.bound, frozenset({o})) if loop.bound is not None else None
    expand = view.expander(frozenset({o}))
    window: Node | None = None
    if idx == {(o,): 1} and cond is None and start == {}:  # for (j = 0; j <= i; ++j) acc += in[j]
        if not ((loop.op == "<=" and bound == g) or (loop.op == "<" and bound == poly_add(g, {(): 1}))):
            return None
    elif idx == poly_add(g, {(o,): 1}, -1) and start == {} and cond is not None and loop.op == "<":
        if at_least_zero(expand, view, cond) != idx:  # if (i - o >= 0): the offset form, window L
            return None
        if bound is None or not poly_uniform(bound):
            return None
        window = loop.bound
    else:
        return None
    top = loop.node
    while top.parent is not None and top.parent != view.body:
        top = top.parent
    if any(r.start_byte < loop.node.end_byte for r in view.returns):
        return NotApplicable("a `return` before the prefix loop: the block scan needs every thread")
    active, limits = [], []
    covered = window is None
    for term, neg in guards(view, loop.node):
        q = at_least_zero(expand, view, term, neg)
        if neg or q is None or not poly_uniform(high := poly_add(q, g)):  # i <= high: i < high + 1
            return NotApplicable(
                f"the prefix loop runs under `{view.text(term)}`, not a bound of the thread's index"
            )
        active.append(term)
        limits.append(poly_render(poly_add(high, {(): 1}), expand.atoms, False))
        if window is not None and poly_add(high, {(): 1}) == bound:
            covered = True
    elem = view.element_type(read.array)
    if elem not in ("float", "double", "int", "unsigned int", "long long") or view.element_type(acc) != elem:
        return NotApplicable(
            "the prefix sums an element type the shuffles do not carry, or into another type"
        )
    return NaivePrefix(view, loop, acc, read.array, elem, tuple(active), window, top, covered, tuple(limits))


def _prefix_rewrite(match: NaivePrefix) -> Outcome:
    view, loop = match.view, match.loop
    e = Emitter(view)
    ind = e.indent(match.statement)
    u = e.unit(match.statement, loop.node) if match.statement != loop.node else "    "
    t, x = match.elem, match.array
    prefix, v, before, start, j, k, lanes_sum = (
        e.fresh(stem) for stem in ("prefix", "v", "before", "start", "j", "k", "partials")
    )
    active = " && ".join(f"({view.text(a)})" for a in match.active)
    upto = start
    for limit in match.limits:  # a block past the guards' bound reads no further than it
        upto = f"({upto} < ({limit}) ? {upto} : (long long)({limit}))"
    own = f"{x}[{start} + threadIdx.x]"
    bar = "__syncthreads();"
    lines = [
        "// cuda-agent: the prefix sum as a block scan (warp shuffles) plus the sum of the blocks before this one",
        f"{t} {prefix};",
        "{",
        f"{u}const long long {start} = (long long)blockIdx.x * blockDim.x;",
        f"{u}{t} {v} = ({active}) ? {own} : ({t})0;" if active else f"{u}{t} {v} = {own};",
        f"{u}{t} {before} = 0;  // the elements of the blocks before this one",
        f"{u}for (long long {j} = threadIdx.x; {j} < {upto}; {j} += blockDim.x) {before} += {x}[{j}];",
        *(f"{u}{line}" for line in _warp_scan(e, t, v, u, bar)),
        f"{u}__shared__ {t} {lanes_sum}[1024];",
        f"{u}{lanes_sum}[threadIdx.x] = {before};",
        f"{u}{bar}",
        f"{u}{before} = 0;",
        f"{u}for (unsigned {k} = 0; {k} < blockDim.x; ++{k}) {before} += {lanes_sum}[{k}];",
        f"{u}{prefix} = {before} + {v};",
        "}",
    ]
    e.insert_before(
        match.statement,
        "\n".join(lines[:1] + [ind + line if line.strip() else "" for line in lines[1:]]) + "\n" + ind,
    )
    if match.bound is None or match.covered:
        e.replace(loop.node, f"{match.acc} += {prefix};")
    else:
        gi = "((long long)blockIdx.x * blockDim.x + threadIdx.x)"
        e.replace(
            loop.node,
            f"if ({gi} < ({view.text(match.bound)})) {match.acc} += {prefix};  // the whole prefix\n"
            f"{e.indent(loop.node)}else {view.text(loop.node)}",
        )
    return e.rewrite(f"prefix sum of {x} as a block scan plus the blocks before")
