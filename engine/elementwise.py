"""Elementwise kernels (one element per thread, or a grid-stride loop over them): the grid-stride
loop (:class:`GridStride`) and 8/16-byte packs (:class:`Vectorize`).

:func:`_elementwise` recognises ``[declarations;] T i = <global x index>; [declarations;]`` then
``if (i < BOUND) BODY``, ``if (i >= BOUND) return; BODY``, a grid-stride loop ``for (T i = <global
x index>; i < BOUND; i += blockDim.x * gridDim.x) BODY``, or ``BODY`` alone when the spec's 1-D
launch covers exactly a count the scalar parameters say (grid x block is the domain, no bounds
check: :func:`engine.guards.launch_covers`, the bound the rewrite loops to); the guard and
the grid-stride loop are patterns (:data:`IN_BOUNDS`, :data:`OUT_OF_BOUNDS`, :data:`GRID_STRIDE`:
:mod:`engine.patterns`) over the global index's canonical polynomial.
"""

from __future__ import annotations

import ast
from collections.abc import Hashable
from dataclasses import dataclass, replace
from typing import ClassVar

import tree_sitter

from cudasrc.dtypes import dtype_bytes
from cudasrc.launch import LaunchChange
from engine import NotApplicable, Outcome, Subject, _block_names, _inside, _pack, _Scale
from engine.guards import launch_covers
from engine.passes import PAD, Emitter, Match, Parameterized
from engine.patterns import ANY, Assign, Bin, For, Poly, Var
from engine.view import KernelView, global_index, statements, unparenthesized, walk, written
from sandbox.contract import DeviceInfo

Node = tree_sitter.Node


@dataclass(frozen=True)
class _Elementwise:
    """``[declarations;] T i = <global x index>; [declarations;]`` then ``if (i < BOUND) BODY`` or
    ``if (i >= BOUND) return; BODY``, or ``[declarations;]`` then a grid-stride loop
    ``for (T i = <global x index>; i < BOUND; i += blockDim.x * gridDim.x) BODY`` (``strided``)."""

    index: str
    index_type: str
    bound: str
    prelude: tuple[Node, ...]
    body: tuple[Node, ...]
    strided: bool = False


def _index_declaration(view: KernelView, s: Node) -> tuple[str, str] | None:
    """(name, type) when ``s`` declares one local whose value is the global x index, in whatever
    form (through other locals, casts, either operand order)."""
    decls = s.children_by_field_name("declarator")
    if len(decls) != 1 or decls[0].type != "init_declarator":
        return None
    name, value = decls[0].child_by_field_name("declarator"), decls[0].child_by_field_name("value")
    ty = s.child_by_field_name("type")
    if name is None or value is None or ty is None or name.type != "identifier":
        return None
    local = view.locals.get(view.text(name))
    if local is None or local.reassigned or view.poly(value) != global_index("x"):
        return None
    index_type = " ".join(view.text(ty).split())
    return view.text(name), "long long" if index_type == "auto" else index_type


def _moved_index(view: KernelView, s: Node) -> str:
    """``i = <value>`` when ``s`` declares one local whose value reads ``threadIdx.x`` but is not the
    global x index (offset, scaled); "" otherwise."""
    decls = s.children_by_field_name("declarator")
    value = decls[0].child_by_field_name("value") if len(decls) == 1 else None
    p = view.poly(value) if value is not None else None
    if (
        p is None
        or p == global_index("x")
        or not any("threadIdx.x" in mono for mono in p)
        or not any("blockIdx.x" in mono for mono in p)  # a block-local index is not a moved global one
    ):
        return ""
    return " ".join(view.text(decls[0]).split())


_GX = Poly(global_index("x"))  # the global x index, in any spelling
_STRIDE = Poly({("blockDim.x", "gridDim.x"): 1})
IN_BOUNDS = Bin("<", _GX, ANY @ "bound")  # i < N, N > i
OUT_OF_BOUNDS = Bin(">=", _GX, ANY @ "bound")  # i >= N, N <= i
# for (T i = <global x index>; i < BOUND; i += blockDim.x * gridDim.x) (or i = i + stride)
GRID_STRIDE = For(
    "i",
    start=_GX,
    cond=Bin("<", Var("i"), ANY @ "bound"),
    update=Assign("+=", Var("i"), _STRIDE) | Assign("=", Var("i"), Bin("+", Var("i"), _STRIDE)),
)


def _guard(view: KernelView, s: Node) -> tuple[bool, Node] | None:
    """(in_bounds, bound) for ``if (i < BOUND)`` (True) or ``if (i >= BOUND)`` (False), either
    way round, ``i`` any form of the global x index."""
    clause = s.child_by_field_name("condition")
    cond = clause.child_by_field_name("value") if clause is not None else None
    for in_bounds, pattern in ((True, IN_BOUNDS), (False, OUT_OF_BOUNDS)):
        caps = pattern.match(view, cond, {})
        if caps is not None:
            return in_bounds, caps["bound"]
    return None


def _grid_stride_loop(view: KernelView, s: Node) -> tuple[str, str, Node, Node] | None:
    """(i, its type, BOUND, BODY) for a loop :data:`GRID_STRIDE` matches that declares ``i``."""
    caps = GRID_STRIDE.match(view, s, {})
    init = s.child_by_field_name("initializer")
    ty = init.child_by_field_name("type") if init is not None else None
    if caps is None or ty is None:
        return None
    index_type = " ".join(view.text(ty).split())
    return caps["i"], "long long" if index_type == "auto" else index_type, caps["bound"], caps["loop"].body


def _elementwise(view: KernelView) -> _Elementwise | NotApplicable:
    stmts = statements(view.body)
    index = index_type = ""
    prelude: list[Node] = []
    for k, s in enumerate(stmts):
        if s.type == "declaration" and not index and (found := _index_declaration(view, s)) is not None:
            index, index_type = found
            continue
        if s.type == "for_statement" and not index and (loop := _grid_stride_loop(view, s)) is not None:
            if stmts[k + 1 :]:
                return NotApplicable("statements follow the grid-stride loop")
            index, index_type, bound, body = loop
            found_body = _check_body(view, index, index_type, bound, prelude, statements(body))
            return replace(found_body, strided=True) if isinstance(found_body, _Elementwise) else found_body
        if s.type == "declaration" and s not in view.shared and index not in view.names(s):
            prelude.append(s)
            continue
        if not index or s.type != "if_statement" or s.child_by_field_name("alternative") is not None:
            break
        guard = _guard(view, s)
        conseq = s.child_by_field_name("consequence")
        if guard is None or conseq is None:
            break
        in_bounds, bound = guard
        if in_bounds:
            if stmts[k + 1 :]:
                return NotApplicable("statements follow the bounds check")
            return _check_body(view, index, index_type, bound, prelude, statements(conseq))
        inner = statements(conseq)
        if len(inner) == 1 and inner[0].type == "return_statement" and inner[0].named_child_count == 0:
            return _check_body(view, index, index_type, bound, prelude, stmts[k + 1 :])
        break
    if not index:
        moved = next((d for s in stmts if s.type == "declaration" and (d := _moved_index(view, s))), "")
        if moved:  # `i = (blockIdx.x * blockDim.x + threadIdx.x) * s`, `... + s`: a strided access
            return NotApplicable(
                f"`{moved}` offsets or scales the global x index: its accesses are not one element per "
                "thread at `[i]`, so packs and loops over the elements do not apply"
            )
        return NotApplicable("no `i = blockIdx.x * blockDim.x + threadIdx.x` index")
    taken = [k for k, s in enumerate(stmts) if s in prelude or _index_declaration(view, s) is not None]
    rest = stmts[max(taken) + 1 :] if taken else []
    if rest and all(s.type != "if_statement" for s in rest):  # no test at all: not a guard unread
        if len(view.subject.spec.grid) != 1 or len(view.subject.spec.block) != 1:
            return NotApplicable(
                f"no bounds check (`if ({index} < N)`) on a launch that is not 1-D: the loop over the "
                "elements runs on a 1-D launch only"
            )
        count = next(iter(launch_covers(view, "x")), "")
        if count:
            return _check_body(view, index, index_type, count, prelude, rest)
        return NotApplicable(
            f"no bounds check (`if ({index} < N)`), and no scalar parameter gives the launch's extent: "
            "a loop over the elements would not know where to stop"
        )
    return NotApplicable(f"the body is not `if ({index} < N) ...` (one element per thread)")


_LOOPS = ("for_statement", "while_statement", "do_statement")


def _check_body(
    view: KernelView, index: str, index_type: str, bound: Node | str, prelude: list[Node], body: list[Node]
) -> _Elementwise | NotApplicable:
    """The per-element body can run once per element in a loop: it does not depend on the thread's
    position (but through the index), does not synchronise or leave, and carries no state from one
    element to the next (assigns nothing declared outside it)."""
    if not body:
        return NotApplicable("the per-element body is empty")
    # a str bound is the element count from the spec (no bounds check): parameters only
    if not isinstance(bound, str) and (
        view.positions(bound) or view.names(bound) & (view.thread_dependent | view.block_dependent)
    ):
        return NotApplicable("the bound depends on the thread's position")
    outside = {name for name, loc in view.locals.items() if not any(_inside(loc.decl, s) for s in body)}
    moving = (view.thread_dependent | view.block_dependent) & outside - {index}
    loops = (*_LOOPS, "switch_statement")
    for s in body:
        for n in walk(s):
            if n.type in ("return_statement", "goto_statement"):
                return NotApplicable("the per-element body returns or jumps")
            if n.type in ("break_statement", "continue_statement"):
                up = n.parent
                while up is not None and up != s and up.type not in loops:
                    up = up.parent
                if up is None or up.type not in loops:
                    return NotApplicable("the per-element body breaks out of the element")
            if n in view.barriers or n in view.shuffles or n in view.shared:
                return NotApplicable("the per-element body synchronises or shares memory")
            if n.type == "field_expression" and view.positions(n):
                return NotApplicable("the per-element body uses the thread's position")
            if n.type == "identifier" and view.text(n) in moving:
                return NotApplicable(
                    f"the per-element body uses `{view.text(n)}`, which depends on the thread's position"
                )
            if n.type in ("assignment_expression", "update_expression"):
                target = unparenthesized(n.child_by_field_name("left") or n.child_by_field_name("argument"))
                if (
                    target is not None
                    and target.type == "identifier"
                    and view.text(target) not in (set(view.locals) - outside)
                ):
                    return NotApplicable(
                        f"the body assigns `{view.text(target)}`, declared outside it: state would carry between elements"
                    )
    t = " ".join(w for w in index_type.split() if w != "const")
    # declarations of the thread's position (`int tid = threadIdx.x;`) are left out: nothing the
    # loop runs may use them
    declared = {s.id: {n for n, loc in view.locals.items() if loc.decl == s} for s in prelude}
    kept = tuple(s for s in prelude if not declared[s.id] or not declared[s.id] <= moving)
    return _Elementwise(index, t, bound if isinstance(bound, str) else view.text(bound), kept, tuple(body))


def _grid_for(subject: Subject, factor: int, max_blocks: int) -> LaunchChange | NotApplicable:
    """The grid divided by ``factor`` (``block`` -> ``block * factor``), at most ``max_blocks``; at
    least one block where the grid divides down (``n / block``: the exact grid of a kernel with no
    bounds check reaches 0 on a problem smaller than a block's elements, the loop needs one)."""
    grid = subject.grid
    if len(grid) != 1 or not _block_names(grid[0]):
        return NotApplicable("the grid is not 1-D and written over `block`, so it cannot shrink")
    tree = _Scale(factor).visit(ast.parse(grid[0], mode="eval"))
    scaled = ast.unparse(ast.fix_missing_locations(tree))
    if factor > 1 and any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) for n in ast.walk(tree)):
        scaled = f"max({scaled}, 1)"
    return LaunchChange(grid=f"min({scaled}, {max_blocks})" if max_blocks else scaled)


def _capped(max_blocks: int) -> str:
    return f", grid capped at {max_blocks} blocks" if max_blocks else ""


def _emit_elementwise(
    em: Emitter, ew: _Elementwise, head: str, vector_part: str, names: dict[str, str]
) -> None:
    """The kernel's body as a grid-stride loop over the elements (after ``vector_part``, which
    covers the first ``names["done"]`` of them)."""
    view = em.view
    pad = PAD
    n, stride, first, done, j = (names[k] for k in ("n", "stride", "first", "done", "j"))
    prelude = "".join(f"{pad}{view.text(s)}\n" for s in ew.prelude)
    scalar = "".join(f"{pad * 2}{view.text(s)}\n" for s in ew.body)
    em.replace(
        view.body,
        "{\n"
        f"{pad}// cuda-agent: {head}\n"
        f"{prelude}"
        f"{pad}const long long {n} = (long long)({ew.bound});\n"
        f"{pad}const long long {stride} = (long long)gridDim.x * blockDim.x;\n"
        f"{pad}const long long {first} = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"{pad}long long {done} = 0;\n"
        f"{vector_part}"
        f"{pad}for (long long {j} = {done} + {first}; {j} < {n}; {j} += {stride}) {{\n"
        f"{pad * 2}const {ew.index_type} {ew.index} = ({ew.index_type}){j};\n"
        f"{scalar}"
        f"{pad}}}\n"
        "}",
    )


def _loop_names(em: Emitter) -> dict[str, str]:
    return {k: em.fresh(k) for k in ("n", "stride", "first", "done", "j")}


@dataclass(frozen=True)
class Elementwise(Match):
    found: _Elementwise


def _match(view: KernelView) -> Elementwise | NotApplicable:
    found = _elementwise(view)
    return found if isinstance(found, NotApplicable) else Elementwise(view, found)


@dataclass(frozen=True)
class GridStride(Parameterized[Elementwise]):
    """One element per thread -> a grid-stride loop; the grid shrinks by ``coarsen`` (each thread
    handles that many elements, strided by the grid so accesses stay coalesced), and to at most
    ``max_blocks`` blocks when that is set (e.g. a few per SM: threads loop over the rest)."""

    coarsen: int = 4
    max_blocks: int = 0
    name: ClassVar[str] = "GridStride"
    leads: ClassVar[bool] = False

    def match(self, view: KernelView) -> Elementwise | NotApplicable:
        return _match(view)

    def space_for(self, device: DeviceInfo | None) -> tuple[Hashable, ...]:
        capped = (GridStride(1, 8 * device.sm_count),) if device and device.sm_count else ()
        return (*self.space, *capped)

    def rewrite(self, match: Elementwise, params: Hashable) -> Outcome:
        assert isinstance(params, GridStride)
        launch = _grid_for(match.view.subject, params.coarsen, params.max_blocks)
        if isinstance(launch, NotApplicable):
            return launch
        em = Emitter(match.view)
        _emit_elementwise(em, match.found, f"grid-stride loop, grid / {params.coarsen}", "", _loop_names(em))
        what = f"grid-stride loop (x{params.coarsen} per thread{_capped(params.max_blocks)})"
        return em.rewrite(what, launch)


GridStride.space = (GridStride(1), GridStride(2), GridStride(4))


def _streams(view: KernelView, loop: Node, index: str) -> bool:
    """Whether ``loop`` reads or writes memory at positions that depend on the element ``index``
    (``A[(size_t)r * cols + j]``) or are not affine (``x[idx[j]]``)."""
    for n in walk(loop):
        idx = view._index_node(n) if n.type == "subscript_expression" else None
        if idx is not None:
            p = view.poly(idx, frozenset({index}))
            if p is None or any(index in mono for mono in p):
                return True
    return False


@dataclass(frozen=True)
class Vectorize(Parameterized[Elementwise]):
    """Elementwise kernel -> ``width``-byte loads/stores of the arrays indexed by ``i`` alone, in a
    grid-stride loop (grid / (lanes * coarsen), at most ``max_blocks`` blocks when set).  A runtime
    check sends misaligned pointers down the scalar path, which also handles the tail."""

    width: int = 16
    coarsen: int = 1
    max_blocks: int = 0
    name: ClassVar[str] = "Vectorize"
    leads: ClassVar[bool] = False

    def match(self, view: KernelView) -> Elementwise | NotApplicable:
        return _match(view)

    def space_for(self, device: DeviceInfo | None) -> tuple[Hashable, ...]:
        capped = (Vectorize(16, 1, 8 * device.sm_count),) if device and device.sm_count else ()
        return (*self.space, *capped)

    def rewrite(self, match: Elementwise, params: Hashable) -> Outcome:
        assert isinstance(params, Vectorize)
        return params._vectorize(match)

    def _vectorize(self, match: Elementwise) -> Outcome:
        ew, view = match.found, match.view
        subject = view.subject
        em = Emitter(view)
        if any(_streams(view, n, ew.index) for s in ew.body for n in walk(s) if n.type in _LOOPS):
            return NotApplicable(
                "the element's work loops over memory (a row per element): packs would serialise rows in a thread"
            )
        arrays = subject.arrays()
        element = {(ew.index,): 1}  # the canonical index of `x[i]`, `x[(size_t)i]`, `x[j]` with j = i ...
        uses: dict[str, list[Node]] = {}
        plain: set[str] = set()  # arrays used other than as `x[i]`: they stay scalar
        for s in ew.body:
            for n in walk(s):
                if n.type != "identifier" or view.text(n) not in arrays:
                    continue
                sub = n.parent
                idx = (
                    view._index_node(sub) if sub is not None and sub.type == "subscript_expression" else None
                )
                if (
                    sub is not None
                    and idx is not None
                    and sub.child_by_field_name("argument") == n
                    and not (sub.parent is not None and sub.parent.type == "pointer_expression")
                    and view.poly(idx, frozenset({ew.index})) == element
                ):
                    uses.setdefault(view.text(n), []).append(sub)
                else:
                    plain.add(view.text(n))
        sizes: dict[str, tuple[str, int]] = {}  # array -> (element type, bytes)
        for name in uses:
            base = view.element_type(name)
            dtype = view.dtype(name)
            if dtype is not None and name not in plain:
                sizes[name] = (base, dtype_bytes(dtype))
        widest = max((b for _, b in sizes.values()), default=0)
        lanes = self.width // widest if widest else 0
        if lanes < 2:
            return NotApplicable(f"no array indexed by `{ew.index}` alone fits {self.width}-byte packs")
        # the widest elements fill the pack; narrower ones (a bf16 input of a float output) travel
        # in packs of as many lanes
        lanes_of = {
            name: (base, _pack(view.dtype(name) or "", lanes * b)) for name, (base, b) in sizes.items()
        }
        launch: LaunchChange | NotApplicable | None = _grid_for(
            subject, lanes * self.coarsen, self.max_blocks
        )
        if isinstance(launch, NotApplicable) and ew.strided and self.coarsen == 1 and not self.max_blocks:
            launch = (
                None  # a grid-stride loop over a grid of its own: it keeps it, each thread loops over packs
            )
        if isinstance(launch, NotApplicable):
            return launch
        stored = {name for name in lanes_of if any(written(u) for u in uses[name])}
        unconditional = {
            view.text(left.child_by_field_name("argument") or left)
            for s in ew.body
            if s.type == "expression_statement"
            and s.named_children
            and s.named_children[0].type == "assignment_expression"
            and (left := s.named_children[0].child_by_field_name("left")) is not None
            and left.type == "subscript_expression"
            and s.named_children[0].children[1].type == "="
        }
        pad = PAD
        names = _loop_names(em)
        n_all, first, stride, done = names["n"], names["first"], names["stride"], names["done"]
        v, k, nv = em.fresh("v"), em.fresh("k"), em.fresh("nv")
        vec = {name: em.fresh(f"{name}_vec") for name in lanes_of}
        lane_ptr = {name: em.fresh(name) for name in lanes_of}
        lines: list[str] = []
        for name, (base, vt) in lanes_of.items():
            role = arrays[name].role
            load = role != "out" or name not in unconditional
            cast_const = "const " if name not in stored else ""
            if load:
                lines.append(
                    f"{pad * 3}{cast_const}{vt} {vec[name]} = reinterpret_cast<const {vt}*>({name})[{v}];"
                )
            else:
                lines.append(f"{pad * 3}{vt} {vec[name]};")
            lines.append(
                f"{pad * 3}{cast_const}{base}* {lane_ptr[name]} = reinterpret_cast<{cast_const}{base}*>(&{vec[name]});"
            )
        stores = [
            f"{pad * 3}reinterpret_cast<{vt}*>({n})[{v}] = {vec[n]};"
            for n, (_, vt) in lanes_of.items()
            if n in stored
        ]

        lane_nodes = {u.id: name for name in lanes_of for u in uses[name]}
        index_used = False  # whether the body needs `i` beyond the accesses that become lanes

        def lane(n: Node) -> str | None:
            nonlocal index_used
            if n.id in lane_nodes:
                return f"{lane_ptr[lane_nodes[n.id]]}[{k}]"
            index_used |= n.type == "identifier" and view.text(n) == ew.index
            return None

        lane_body = "".join(f"{pad * 4}{em.substitute(s, lane)}\n" for s in ew.body)
        lane_index = (
            f"{pad * 4}const {ew.index_type} {ew.index} = ({ew.index_type})({v} * {lanes} + {k});\n"
            if index_used
            else ""
        )
        groups: dict[int, list[str]] = {}  # pack bytes -> arrays that must be aligned to it
        for name, (_, b) in sizes.items():
            groups.setdefault(lanes * b, []).append(name)
        aligned = " && ".join(
            "(({}) % {}) == 0".format(
                " | ".join(f"reinterpret_cast<unsigned long long>({n})" for n in names), nb
            )
            for nb, names in sorted(groups.items(), reverse=True)
        )
        vector_part = (
            f"{pad}if ({aligned}) {{\n"
            f"{pad * 2}const long long {nv} = {n_all} / {lanes};\n"
            f"{pad * 2}for (long long {v} = {first}; {v} < {nv}; {v} += {stride}) {{\n"
            + "".join(f"{x}\n" for x in lines)
            + f"{pad * 3}#pragma unroll\n"
            f"{pad * 3}for (int {k} = 0; {k} < {lanes}; ++{k}) {{\n"
            f"{lane_index}"
            f"{lane_body}"
            f"{pad * 3}}}\n" + "".join(f"{x}\n" for x in stores) + f"{pad * 2}}}\n"
            f"{pad * 2}{done} = {nv} * {lanes};\n"
            f"{pad}}}\n"
        )
        head = f"{self.width}-byte vector loads/stores of {', '.join(lanes_of)}, grid-stride loop"
        _emit_elementwise(em, ew, head, vector_part, names)
        what = (
            f"{self.width}-byte vectors ({lanes} lanes"
            + (f", x{self.coarsen} per thread" if self.coarsen > 1 else "")
            + f"{_capped(self.max_blocks)})"
        )
        return em.rewrite(what, launch)


Vectorize.space = (Vectorize(16, 1), Vectorize(16, 2), Vectorize(16, 4), Vectorize(8, 1), Vectorize(8, 2))
