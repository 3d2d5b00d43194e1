"""Source transformations of the built-in optimizer: each a small unit that rewrites one kernel.

A :class:`Subject` is a kernel definition (its text, as in :attr:`agent.loop.Target.definition`),
its spec, and what earlier transformations changed (launch configuration, assumptions).  A
transformation's :meth:`Transform.apply` returns a :class:`Rewrite` (new definition text, and
optionally a :class:`~agent.loop.LaunchChange` in the spec's vocabulary) or :class:`NotApplicable`
with the reason.  ``subject.then(rewrite)`` chains them, so the search in :mod:`agent.builtin`
composes any sequence.

The tiled transpose and the other structural rewrites are passes (:mod:`agent.transforms.registry`).
Patterns are recognised on the tree-sitter AST of the kernel body and its
:class:`~agent.transforms.view.KernelView` (the naive forms of ``bench/kernels/`` and real code).  Correctness is decided by the sandbox, which verifies
every candidate against the original; the transformations only refuse what they cannot do right.

========================  ===========================================================================
transformation            applies when
========================  ===========================================================================
:class:`BlockSize`        the spec's grid is written over ``block`` and the kernel has no static
                          ``__shared__`` arrays or ``__launch_bounds__`` sized for the written block
:class:`RestrictConst`    an array parameter lacks ``__restrict__`` (or ``const`` while the spec
                          says ``in``); assumes the arrays never alias
:class:`ReadOnlyLoads`    the kernel reads an ``in`` array of a type ``__ldg`` loads
:class:`GridStride`       the body is ``i = global index; if (i < N) ...`` (matched on the view:
                          any form of the index, either operand order, ``if (i >= N) return;``):
                          a grid-stride loop, the grid shrunk by the coarsening factor
:class:`Vectorize`        as GridStride, for the arrays indexed by ``i`` alone: 8/16-byte packs
                          (``float4``..., ``uint4`` of 8 bf16/half or 16 int8 lanes), a runtime
                          alignment check, a scalar tail
:class:`Unroll`           the body has ``for`` loops without a pragma
:class:`LaunchBounds`     the block size is a constant and the kernel has no ``__launch_bounds__``
:class:`WarpReduction`    a shared-memory tree reduction ``for (s = ...; s > 0; s >>= 1)``: its last
                          five steps become warp shuffles
:class:`SharedHistogram`  ``atomicAdd(&H[k], v);`` / ``atomicAdd(H + k, v);`` (result unused) into an
                          array of constant size (spec) <= 16 KiB, no early ``return``: a
                          per-block copy in shared memory, merged once per block
:class:`FastMath`         single-precision ``expf``/``logf``/``sinf``/... or a division by a float
                          expression with a float-literal operand
========================  ===========================================================================
"""

from __future__ import annotations

import abc
import ast
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import tree_sitter

from agent.loop import LaunchChange
from agent.source import Document, Kernel
from agent.spec import (
    ArraySpec,
    KernelSpec,
    canonical_dtype,
    dtype_bytes,
    evaluate,
    parse_dims,
    render_dims,
)
from agent.transforms.view import KernelView, global_index, statements, unparenthesized, walk, written

Node = tree_sitter.Node
log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Subject:
    """A kernel definition under rewrite: its text, its spec, and what has been changed so far."""

    code: str
    spec: KernelSpec
    launch: LaunchChange = field(default_factory=LaunchChange)
    assumptions: tuple[str, ...] = ()
    applied: tuple[str, ...] = ()  # descriptions of the rewrites so far

    @cached_property
    def doc(self) -> Document:
        return Document(self.code)

    @cached_property
    def kernel(self) -> Kernel:
        if not self.doc.kernels:
            raise ValueError("the code holds no __global__ kernel")
        return self.doc.kernels[-1]

    @cached_property
    def body(self) -> Node | None:
        span = self.kernel.body_span
        if span is None:
            return None
        return self.doc.tree.root_node.named_descendant_for_byte_range(span.start_byte, span.end_byte)

    @cached_property
    def view(self) -> KernelView:
        """The kernel's read-only analysis (:mod:`agent.transforms.view`), built once."""
        return KernelView(self)

    @property
    def block(self) -> tuple[str, ...]:
        """The block dimensions in force (the spec's, or the last launch change's)."""
        return parse_dims(self.launch.block) if self.launch.block else self.spec.block

    @property
    def grid(self) -> tuple[str, ...]:
        return parse_dims(self.launch.grid) if self.launch.grid else self.spec.grid

    def arrays(self) -> dict[str, ArraySpec]:
        """The spec's arrays that are parameters of the kernel (pointer parameters), by name."""
        params = {p.name for p in self.kernel.params if p.pointer == 1}
        return {a.name: a for a in self.spec.args if isinstance(a, ArraySpec) and a.name in params}

    def then(self, rewrite: Rewrite) -> Subject:
        """This subject with ``rewrite`` applied (launch changes merge, later fields win)."""
        new = rewrite.launch or LaunchChange()
        launch = LaunchChange(
            grid=new.grid or self.launch.grid,
            block=new.block or self.launch.block,
            shared=new.shared or self.launch.shared,
        )
        extra = tuple(a for a in rewrite.assumptions if a not in self.assumptions)
        return Subject(
            rewrite.code, self.spec, launch, self.assumptions + extra, (*self.applied, rewrite.description)
        )


@dataclass(frozen=True)
class Rewrite:
    code: str
    description: str
    launch: LaunchChange | None = None
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotApplicable:
    reason: str


Outcome = Rewrite | NotApplicable


class Transform(abc.ABC):
    """One transformation with its parameters (a frozen dataclass)."""

    @abc.abstractmethod
    def apply(self, subject: Subject) -> Outcome: ...


# --------------------------------------------------------------------------------------- helpers


def _text(subject: Subject, node: Node) -> str:
    return subject.doc.node_text(node)


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _rebuild(subject: Subject, node: Node, replace_fn: Callable[[Node], str | None]) -> str:
    """``node``'s text with every subtree for which ``replace_fn`` answers a string replaced by it
    (outermost first; a replacement may itself call :func:`_rebuild` on children)."""
    data = subject.doc.data
    out: list[bytes] = []
    pos = node.start_byte

    def visit(n: Node) -> None:
        nonlocal pos
        new = replace_fn(n) if n is not node else None
        if new is not None:
            out.append(data[pos : n.start_byte])
            out.append(new.encode())
            pos = n.end_byte
            return
        for c in n.children:
            visit(c)

    visit(node)
    out.append(data[pos : node.end_byte])
    return b"".join(out).decode("utf-8", errors="replace")


def _splice(code: str, edits: list[tuple[int, int, str]], data: bytes) -> str:
    """Apply (start_byte, end_byte, text) edits to ``data`` (the UTF-8 of ``code``)."""
    out, pos = [], 0
    for start, end, text in sorted(edits):
        out += [data[pos:start], text.encode()]
        pos = end
    out.append(data[pos:])
    return b"".join(out).decode("utf-8", errors="replace")


def _with_body(subject: Subject, body: Node, text: str) -> str:
    """The subject's code with the kernel body ``body`` (braces included) replaced by ``text``."""
    return _splice(subject.code, [(body.start_byte, body.end_byte, text)], subject.doc.data)


def _indent(subject: Subject, node: Node) -> str:
    line = subject.doc.line_bytes(node.start_point.row).decode("utf-8", errors="replace")
    return line[: len(line) - len(line.lstrip())]


def _block_names(expr: str) -> bool:
    tree = ast.parse(expr, mode="eval")
    return any(isinstance(n, ast.Name) and n.id.startswith("block") for n in ast.walk(tree))


class _Scale(ast.NodeTransformer):
    """Replace ``block``/``block_x`` by ``(block * factor)`` in a spec expression."""

    def __init__(self, factor: int) -> None:
        self.factor = factor

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in ("block", "block_x") and self.factor != 1:
            return ast.BinOp(ast.Name(node.id), ast.Mult(), ast.Constant(self.factor))
        return node


def _static_shared(subject: Subject) -> bool:
    """Whether the body declares static ``__shared__`` arrays (other than :class:`SharedHistogram`'s,
    whose size does not depend on the block)."""
    body = subject.body
    return body is not None and any(
        n.type == "declaration"
        and "__shared__" in _text(subject, n)
        and "extern" not in _text(subject, n)
        and "[" in _text(subject, n)
        and f" {HISTOGRAM_COPY}[" not in _text(subject, n)
        for n in walk(body)
    )


def _constant_block(subject: Subject) -> int | None:
    """Threads per block when every block dimension is a constant."""
    total = 1
    for d in subject.block:
        try:
            v = evaluate(d, {})
        except ValueError:
            return None
        if not isinstance(v, int) or v <= 0:
            return None
        total *= v
    return total


# --------------------------------------------------------------------------------------- launch


@dataclass(frozen=True)
class BlockSize(Transform):
    """Launch with another block size, through the spec's ``block`` (the grid follows it)."""

    block: tuple[int, ...]

    def apply(self, subject: Subject) -> Outcome:
        if not any(_block_names(g) for g in subject.grid):
            return NotApplicable("the grid is not written over `block`, so it would not follow a new block")
        if len(self.block) != len(subject.block):
            return NotApplicable(f"the kernel is launched with {len(subject.block)}-D blocks")
        if _static_shared(subject):
            return NotApplicable("static __shared__ arrays are sized for the written block")
        if subject.kernel.launch_bounds is not None:
            return NotApplicable("__launch_bounds__ fixes the block size")
        block = render_dims(tuple(str(b) for b in self.block))
        if block == render_dims(subject.block):
            return NotApplicable(f"the block is already {block}")
        return Rewrite(subject.code, f"block {block}", LaunchChange(block=block))


@dataclass(frozen=True)
class LaunchBounds(Transform):
    """``__launch_bounds__(threads)`` for the block size in force, so ptxas budgets registers for it."""

    min_blocks: int = 0

    def apply(self, subject: Subject) -> Outcome:
        k = subject.kernel
        if k.launch_bounds is not None:
            return NotApplicable("the kernel already has __launch_bounds__")
        threads = _constant_block(subject)
        if threads is None:
            return NotApplicable("the block size is not a constant")
        arg = f"{threads}, {self.min_blocks}" if self.min_blocks else str(threads)
        code = _splice(
            subject.code,
            [(k.name_span.start_byte, k.name_span.start_byte, f"__launch_bounds__({arg}) ")],
            subject.doc.data,
        )
        return Rewrite(code, f"__launch_bounds__({arg})")


# --------------------------------------------------------------------------------------- pointers


@dataclass(frozen=True)
class RestrictConst(Transform):
    """``__restrict__`` on every array parameter, ``const`` on the ones the spec reads only."""

    def apply(self, subject: Subject) -> Outcome:
        arrays = subject.arrays()
        edits: list[tuple[int, int, str]] = []
        for p in subject.kernel.params:
            a = arrays.get(p.name)
            if a is None or p.reference:
                continue
            const = p.const or a.role == "in"
            if p.restrict and const == p.const:
                continue
            text = f"{'const ' if const else ''}{p.base_type}* __restrict__ {p.name}"
            edits.append((p.span.start_byte, p.span.end_byte, text))
        if not edits:
            return NotApplicable("every array parameter is already __restrict__ (and const where read-only)")
        names = list(arrays)
        assumption = (
            f"{', '.join(names[:-1])} and {names[-1]} never alias"
            if len(names) > 1
            else f"{names[0]} is not aliased"
        )
        code = _splice(subject.code, edits, subject.doc.data)
        return Rewrite(code, "__restrict__/const pointers", assumptions=(assumption,))


_LDG_TYPES = frozenset(
    {"float", "double", "int", "unsigned int", "unsigned", "long long", "unsigned long long", "short", "char"}
    | {f"{t}{n}" for t in ("float", "int", "uint") for n in (2, 4)}
    | {"double2", "longlong2"}
)


def _subscript_base(subject: Subject, node: Node) -> str:
    """The array a subscript reads: ``a`` for ``a[i]`` and ``reinterpret_cast<const float4*>(a)[v]``."""
    arg = node.child_by_field_name("argument")
    if arg is None:
        return ""
    if arg.type == "identifier":
        return _text(subject, arg)
    if arg.type == "call_expression" and "reinterpret_cast" in _text(subject, arg):
        args = arg.child_by_field_name("arguments")
        inner = args.named_children if args is not None else []
        if len(inner) == 1 and inner[0].type == "identifier":
            return _text(subject, inner[0])
    return ""


@dataclass(frozen=True)
class ReadOnlyLoads(Transform):
    """Loads of ``in`` arrays through the read-only data cache: ``a[i]`` -> ``__ldg(&a[i])``."""

    def apply(self, subject: Subject) -> Outcome:
        body = subject.body
        if body is None:
            return NotApplicable("the kernel has no body")
        inputs = {
            p.name
            for p in subject.kernel.params
            if p.pointer == 1
            and subject.arrays().get(p.name, ArraySpec("", "out", "", "")).role == "in"
            and " ".join(p.base_type.split()) in _LDG_TYPES
        }
        if not inputs:
            return NotApplicable("no `in` array of a type __ldg loads")
        count = 0

        def sub(n: Node) -> str | None:
            nonlocal count
            if n.type == "subscript_expression" and _subscript_base(subject, n) in inputs and not written(n):
                count += 1
                return f"__ldg(&{_rebuild(subject, n, sub)})"
            if n.type == "call_expression" and _text(subject, n).startswith("__ldg"):
                return _text(subject, n)
            return None

        new_body = _rebuild(subject, body, sub)
        if not count:
            return NotApplicable("no plain loads of `in` arrays")
        code = _with_body(subject, body, new_body)
        return Rewrite(code, f"__ldg on {count} load(s)")


# --------------------------------------------------------------------------------------- elementwise


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


def _guard(view: KernelView, s: Node) -> tuple[bool, Node] | None:
    """(in_bounds, bound) for ``if (i < BOUND)`` / ``if (BOUND > i)`` (True) or ``i >= BOUND`` /
    ``BOUND <= i`` (False), ``i`` any form of the global x index."""
    clause = s.child_by_field_name("condition")
    cond = unparenthesized(clause.child_by_field_name("value") if clause is not None else None)
    if cond is None or cond.type != "binary_expression":
        return None
    left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    op = view.text(cond.children[1])
    if left is None or right is None:
        return None
    gx = global_index("x")
    if view.poly(left) == gx and op in ("<", ">="):
        return op == "<", right
    if view.poly(right) == gx and op in (">", "<="):
        return op == ">", left
    return None


def _grid_stride_loop(view: KernelView, s: Node) -> tuple[str, str, Node, Node] | None:
    """(i, its type, BOUND, BODY) for ``for (T i = <global x index>; i < BOUND; i += blockDim.x *
    gridDim.x) BODY`` (or ``i = i + gridDim.x * blockDim.x``, either operand order)."""
    loop = view.loop_of(s)
    init, update = s.child_by_field_name("initializer"), s.child_by_field_name("update")
    ty = init.child_by_field_name("type") if init is not None else None
    if loop is None or not loop.var or loop.start is None or loop.op != "<" or loop.bound is None:
        return None
    if ty is None or update is None or update.type != "assignment_expression":
        return None
    if view.poly(loop.start) != global_index("x"):
        return None
    op, right = view.text(update.children[1]), unparenthesized(update.child_by_field_name("right"))
    step = None
    if op == "+=" and right is not None:
        step = right
    elif (
        op == "="
        and right is not None
        and right.type == "binary_expression"
        and view.text(right.children[1]) == "+"
    ):
        sides = [unparenthesized(right.child_by_field_name(f)) for f in ("left", "right")]
        rest = [
            x for x in sides if x is not None and not (x.type == "identifier" and view.text(x) == loop.var)
        ]
        step = rest[0] if len(rest) == 1 else None
    if step is None or view.poly(step) != {("blockDim.x", "gridDim.x"): 1}:
        return None
    index_type = " ".join(view.text(ty).split())
    return loop.var, "long long" if index_type == "auto" else index_type, loop.bound, loop.body


def _elementwise(subject: Subject) -> _Elementwise | NotApplicable:
    view = subject.view
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
        return NotApplicable("no `i = blockIdx.x * blockDim.x + threadIdx.x` index")
    return NotApplicable(f"the body is not `if ({index} < N) ...` (one element per thread)")


_LOOPS = ("for_statement", "while_statement", "do_statement")


def _inside(node: Node, outer: Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _check_body(
    view: KernelView, index: str, index_type: str, bound: Node, prelude: list[Node], body: list[Node]
) -> _Elementwise | NotApplicable:
    """The per-element body can run once per element in a loop: it does not depend on the thread's
    position (but through the index), does not synchronise or leave, and carries no state from one
    element to the next (assigns nothing declared outside it)."""
    if not body:
        return NotApplicable("the per-element body is empty")
    if view.positions(bound) or view.names(bound) & (view.thread_dependent | view.block_dependent):
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
    return _Elementwise(index, t, view.text(bound), kept, tuple(body))


def _grid_for(subject: Subject, factor: int, max_blocks: int) -> LaunchChange | NotApplicable:
    """The grid divided by ``factor`` (``block`` -> ``block * factor``), at most ``max_blocks``."""
    grid = subject.grid
    if len(grid) != 1 or not _block_names(grid[0]):
        return NotApplicable("the grid is not 1-D and written over `block`, so it cannot shrink")
    tree = _Scale(factor).visit(ast.parse(grid[0], mode="eval"))
    scaled = ast.unparse(ast.fix_missing_locations(tree))
    return LaunchChange(grid=f"min({scaled}, {max_blocks})" if max_blocks else scaled)


def _capped(max_blocks: int) -> str:
    return f", grid capped at {max_blocks} blocks" if max_blocks else ""


def _emit_elementwise(subject: Subject, ew: _Elementwise, head: str, vector_part: str) -> str:
    k = subject.kernel
    assert k.body_span is not None
    pad = "    "
    prelude = "".join(f"{pad}{_text(subject, s)}\n" for s in ew.prelude)
    scalar = "".join(f"{pad * 2}{_text(subject, s)}\n" for s in ew.body)
    body = (
        "{\n"
        f"{pad}// cuda-agent: {head}\n"
        f"{prelude}"
        f"{pad}const long long ca_n = (long long)({ew.bound});\n"
        f"{pad}const long long ca_stride = (long long)gridDim.x * blockDim.x;\n"
        f"{pad}const long long ca_first = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
        f"{pad}long long ca_done = 0;\n"
        f"{vector_part}"
        f"{pad}for (long long ca_j = ca_done + ca_first; ca_j < ca_n; ca_j += ca_stride) {{\n"
        f"{pad * 2}const {ew.index_type} {ew.index} = ({ew.index_type})ca_j;\n"
        f"{scalar}"
        f"{pad}}}\n"
        "}"
    )
    return _splice(subject.code, [(k.body_span.start_byte, k.body_span.end_byte, body)], subject.doc.data)


@dataclass(frozen=True)
class GridStride(Transform):
    """One element per thread -> a grid-stride loop; the grid shrinks by ``coarsen`` (each thread
    handles that many elements, strided by the grid so accesses stay coalesced), and to at most
    ``max_blocks`` blocks when that is set (e.g. a few per SM: threads loop over the rest)."""

    coarsen: int = 4
    max_blocks: int = 0

    def apply(self, subject: Subject) -> Outcome:
        ew = _elementwise(subject)
        if isinstance(ew, NotApplicable):
            return ew
        launch = _grid_for(subject, self.coarsen, self.max_blocks)
        if isinstance(launch, NotApplicable):
            return launch
        code = _emit_elementwise(subject, ew, f"grid-stride loop, grid / {self.coarsen}", "")
        what = f"grid-stride loop (x{self.coarsen} per thread{_capped(self.max_blocks)})"
        return Rewrite(code, what, launch)


_PACKS = {  # the vector types experts name for packs of 4- and 8-byte elements
    ("float32", 8): "float2",
    ("float32", 16): "float4",
    ("int32", 8): "int2",
    ("int32", 16): "int4",
    ("float64", 16): "double2",
    ("int64", 16): "longlong2",
}
_RAW_PACKS = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short"}


def _pack(dtype: str, nbytes: int) -> str:
    """The type an ``nbytes`` pack of ``dtype`` elements travels in: the CUDA vector type of the
    element where experts name one (``float4``), else raw bits (``uint4`` for 8 bf16 or 16 int8
    lanes), the lanes read through a pointer to the element type."""
    return _PACKS.get((dtype, nbytes)) or _RAW_PACKS[nbytes]


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
class Vectorize(Transform):
    """Elementwise kernel -> ``width``-byte loads/stores of the arrays indexed by ``i`` alone, in a
    grid-stride loop (grid / (lanes * coarsen), at most ``max_blocks`` blocks when set).  A runtime
    check sends misaligned pointers down the scalar path, which also handles the tail."""

    width: int = 16
    coarsen: int = 1
    max_blocks: int = 0

    def apply(self, subject: Subject) -> Outcome:
        ew = _elementwise(subject)
        if isinstance(ew, NotApplicable):
            return ew
        view = subject.view
        if any(_streams(view, n, ew.index) for s in ew.body for n in walk(s) if n.type in _LOOPS):
            return NotApplicable(
                "the element's work loops over memory (a row per element): packs would serialise rows in a thread"
            )
        params = {p.name: p for p in subject.kernel.params}
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
            base = " ".join(params[name].base_type.split())
            dtype = canonical_dtype(base)
            if dtype is not None and name not in plain:
                sizes[name] = (base, dtype_bytes(dtype))
        widest = max((b for _, b in sizes.values()), default=0)
        lanes = self.width // widest if widest else 0
        if lanes < 2:
            return NotApplicable(f"no array indexed by `{ew.index}` alone fits {self.width}-byte packs")
        # the widest elements fill the pack; narrower ones (a bf16 input of a float output) travel
        # in packs of as many lanes
        lanes_of = {
            name: (base, _pack(canonical_dtype(base) or "", lanes * b)) for name, (base, b) in sizes.items()
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
            _text(subject, left.child_by_field_name("argument") or left)
            for s in ew.body
            if s.type == "expression_statement"
            and s.named_children
            and s.named_children[0].type == "assignment_expression"
            and (left := s.named_children[0].child_by_field_name("left")) is not None
            and left.type == "subscript_expression"
            and s.named_children[0].children[1].type == "="
        }
        pad = "    "
        lines: list[str] = []
        for name, (base, vt) in lanes_of.items():
            role = arrays[name].role
            load = role != "out" or name not in unconditional
            cast_const = "const " if name not in stored else ""
            if load:
                lines.append(
                    f"{pad * 3}{cast_const}{vt} ca_{name}_vec = reinterpret_cast<const {vt}*>({name})[ca_v];"
                )
            else:
                lines.append(f"{pad * 3}{vt} ca_{name}_vec;")
            lines.append(
                f"{pad * 3}{cast_const}{base}* ca_{name} = reinterpret_cast<{cast_const}{base}*>(&ca_{name}_vec);"
            )
        stores = [
            f"{pad * 3}reinterpret_cast<{vt}*>({n})[ca_v] = ca_{n}_vec;"
            for n, (_, vt) in lanes_of.items()
            if n in stored
        ]

        lane_nodes = {u.id: name for name in lanes_of for u in uses[name]}
        index_used = False  # whether the body needs `i` beyond the accesses that become lanes

        def lane(n: Node) -> str | None:
            nonlocal index_used
            if n.id in lane_nodes:
                return f"ca_{lane_nodes[n.id]}[ca_k]"
            index_used |= n.type == "identifier" and view.text(n) == ew.index
            return None

        lane_body = "".join(f"{pad * 4}{_rebuild(subject, s, lane)}\n" for s in ew.body)
        lane_index = (
            f"{pad * 4}const {ew.index_type} {ew.index} = ({ew.index_type})(ca_v * {lanes} + ca_k);\n"
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
            f"{pad * 2}const long long ca_nv = ca_n / {lanes};\n"
            f"{pad * 2}for (long long ca_v = ca_first; ca_v < ca_nv; ca_v += ca_stride) {{\n"
            + "".join(f"{x}\n" for x in lines)
            + f"{pad * 3}#pragma unroll\n"
            f"{pad * 3}for (int ca_k = 0; ca_k < {lanes}; ++ca_k) {{\n"
            f"{lane_index}"
            f"{lane_body}"
            f"{pad * 3}}}\n" + "".join(f"{x}\n" for x in stores) + f"{pad * 2}}}\n"
            f"{pad * 2}ca_done = ca_nv * {lanes};\n"
            f"{pad}}}\n"
        )
        head = f"{self.width}-byte vector loads/stores of {', '.join(lanes_of)}, grid-stride loop"
        code = _emit_elementwise(subject, ew, head, vector_part)
        what = (
            f"{self.width}-byte vectors ({lanes} lanes"
            + (f", x{self.coarsen} per thread" if self.coarsen > 1 else "")
            + f"{_capped(self.max_blocks)})"
        )
        return Rewrite(code, what, launch)


# --------------------------------------------------------------------------------------- loops


@dataclass(frozen=True)
class Unroll(Transform):
    """``#pragma unroll N`` before every ``for`` loop of the body that has no pragma."""

    factor: int = 4

    def apply(self, subject: Subject) -> Outcome:
        body = subject.body
        if body is None:
            return NotApplicable("the kernel has no body")
        edits = []
        for n in walk(body):
            if n.type != "for_statement":
                continue
            prev = n.prev_named_sibling
            if prev is not None and prev.type == "preproc_call" and "unroll" in _text(subject, prev):
                continue
            edits.append((n.start_byte, n.start_byte, f"#pragma unroll {self.factor}\n{_indent(subject, n)}"))
        if not edits:
            return NotApplicable("no `for` loop without a pragma")
        return Rewrite(_splice(subject.code, edits, subject.doc.data), f"#pragma unroll {self.factor}")


# --------------------------------------------------------------------------------------- reductions


@dataclass(frozen=True)
class WarpReduction(Transform):
    """A shared-memory tree reduction's last steps (``s <= 32``) as warp shuffles, without barriers::

    for (s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) X[tid] OP= X[tid + s]; __syncthreads(); }
    """

    def apply(self, subject: Subject) -> Outcome:
        body = subject.body
        if body is None:
            return NotApplicable("the kernel has no body")
        for loop in (n for n in walk(body) if n.type == "for_statement"):
            found = self._match(subject, loop)
            if isinstance(found, str):
                new_code = _splice(subject.code, [(loop.start_byte, loop.end_byte, found)], subject.doc.data)
                return Rewrite(new_code, "warp-shuffle reduction (last 5 steps)")
        return NotApplicable(
            "no `for (s = ...; s > 0; s >>= 1) { if (tid < s) X[tid] += X[tid + s]; __syncthreads(); }`"
        )

    def _match(self, subject: Subject, loop: Node) -> str | None:
        init = loop.child_by_field_name("initializer")
        cond = loop.child_by_field_name("condition")
        update = loop.child_by_field_name("update")
        loop_body = loop.child_by_field_name("body")
        if init is None or cond is None or update is None or loop_body is None:
            return None
        decl = init.child_by_field_name("declarator")
        name = decl.child_by_field_name("declarator") if decl is not None else None
        start = decl.child_by_field_name("value") if decl is not None else None
        if name is None or start is None:
            return None
        s = _text(subject, name)
        if _squash(_text(subject, cond)) not in (f"{s}>0", f"0<{s}") or _squash(
            _text(subject, update)
        ) not in (
            f"{s}>>=1",
            f"{s}/=2",
            f"{s}={s}/2",
            f"{s}={s}>>1",
        ):
            return None
        stmts = statements(loop_body)
        if len(stmts) != 2 or _squash(_text(subject, stmts[1])) != "__syncthreads();":
            return None
        guard = stmts[0]
        if guard.type != "if_statement" or guard.child_by_field_name("alternative") is not None:
            return None
        gcond = _squash(_text(subject, guard.child_by_field_name("condition") or guard))
        m = re.fullmatch(rf"\((\w+(?:\.x)?)<{re.escape(s)}\)", gcond)
        conseq = guard.child_by_field_name("consequence")
        if m is None or conseq is None or len(statements(conseq)) != 1:
            return None
        tid = m[1]
        if tid != "threadIdx.x" and not re.search(
            rf"\b{re.escape(tid)}\s*=\s*threadIdx\.x\s*;", _text(subject, subject.body or loop)
        ):
            return None
        step = _text(subject, statements(conseq)[0])
        sq = _squash(step)
        arr = re.search(
            rf"(\w+)\[{re.escape(tid)}\+{re.escape(s)}\]|(\w+)\[{re.escape(s)}\+{re.escape(tid)}\]", sq
        )
        if arr is None:
            return None
        x = arr[1] or arr[2]
        far = re.compile(
            rf"\b{x}\s*\[\s*(?:{re.escape(tid)}\s*\+\s*{re.escape(s)}|{re.escape(s)}\s*\+\s*{re.escape(tid)})\s*\]"
        )
        near = re.compile(rf"\b{x}\s*\[\s*{re.escape(tid)}\s*\]")
        if not near.search(step):
            return None
        first = near.sub("ca_v", far.sub(f"{x}[{tid} + 32]", step))
        shuffle = near.sub("ca_v", far.sub("__shfl_down_sync(0xffffffffu, ca_v, ca_o)", step))
        ind = _indent(subject, loop)
        cond_start = cond.start_byte - loop.start_byte
        cond_end = cond.end_byte - loop.start_byte
        raw = subject.doc.data[loop.start_byte : loop.end_byte]
        tree_loop = (raw[:cond_start] + f"{s} > 32".encode() + raw[cond_end:]).decode(
            "utf-8", errors="replace"
        )
        start_text = _text(subject, start)
        return (
            f"{tree_loop}\n"
            f"{ind}if ({tid} < 32) {{  // cuda-agent: the last warp reduces with shuffles, no barriers\n"
            f"{ind}    auto ca_v = {x}[{tid}];\n"
            f"{ind}    if (({start_text}) >= 32) {first}\n"
            f"{ind}    #pragma unroll\n"
            f"{ind}    for (int ca_o = 16; ca_o > 0; ca_o >>= 1) {shuffle}\n"
            f"{ind}    if ({tid} == 0) {x}[0] = ca_v;\n"
            f"{ind}}}\n"
            f"{ind}__syncthreads();"
        )


# --------------------------------------------------------------------------------------- histogram

_SHARED_ATOMIC_TYPES = ("int", "unsigned int", "unsigned", "float", "unsigned long long")
HISTOGRAM_COPY = "ca_hist"  # the per-block copy's name
SHARED_HISTOGRAM_BYTES = 16 << 10  # leave most of the SM's shared memory to other blocks


def _atomic_target(view: KernelView, address: Node) -> Node | None:
    """The array's name node in an atomic's address: ``&H[k]``, ``&(H[k])``, ``H + k``, ``k + H``."""
    a = unparenthesized(address)
    if a is not None and a.type == "pointer_expression" and a.children[0].type == "&":
        sub = unparenthesized(a.child_by_field_name("argument"))
        base = (
            sub.child_by_field_name("argument")
            if sub is not None and sub.type == "subscript_expression"
            else None
        )
        return base if base is not None and base.type == "identifier" else None
    if a is not None and a.type == "binary_expression" and view.text(a.children[1]) == "+":
        sides = [unparenthesized(a.child_by_field_name(f)) for f in ("left", "right")]
        arrays = [
            x for x in sides if x is not None and x.type == "identifier" and view.params.get(view.text(x))
        ]
        pointers = [x for x in arrays if view.params[view.text(x)].pointer == 1]
        return pointers[0] if len(pointers) == 1 else None
    return None


@dataclass(frozen=True)
class SharedHistogram(Transform):
    """``atomicAdd(&H[k], v)`` into a small fixed-size array ``H`` -> a per-block copy of ``H`` in
    shared memory, zeroed first and added into ``H`` once per block at the end, so most atomics hit
    shared memory instead of contending in L2.  With ``max_blocks`` the kernel first becomes a
    grid-stride loop over at most that many blocks (see :class:`GridStride`), so the per-block merge
    is paid a few times per SM rather than once per original block."""

    max_blocks: int = 0

    def apply(self, subject: Subject) -> Outcome:
        launch: LaunchChange | None = None
        if self.max_blocks:
            strided = GridStride(1, self.max_blocks).apply(subject)
            if isinstance(strided, NotApplicable):
                return strided
            subject, launch = subject.then(strided), strided.launch
        body = subject.body
        if body is None:
            return NotApplicable("the kernel has no body")
        view = subject.view
        params = {p.name: p for p in subject.kernel.params if p.pointer == 1}
        targets: dict[str, list[Node]] = {}  # array -> its name's nodes in ``atomicAdd(&H[k], v)`` calls
        for call in view.atomics:
            fn, args = call.child_by_field_name("function"), call.child_by_field_name("arguments")
            if fn is None or args is None or view.text(fn) != "atomicAdd" or not args.named_children:
                continue
            base = _atomic_target(view, args.named_children[0])
            if base is not None and view.text(base) in params:
                if call.parent is None or call.parent.type != "expression_statement":
                    return NotApplicable(
                        "the value an atomicAdd returns is used: a per-block copy would change it"
                    )
                targets.setdefault(view.text(base), []).append(base)
        if not targets:
            return NotApplicable("no `atomicAdd(&H[k], v)` into an array parameter")
        name, bases = next(iter(targets.items()))
        uses = [n for n in walk(body) if n.type == "identifier" and view.text(n) == name]
        if len(uses) != len(bases):
            return NotApplicable(f"`{name}` is used other than through atomicAdd")
        if view.returns:
            return NotApplicable("the body returns early: not every thread would reach the merge")
        spec = subject.arrays().get(name)
        elem = params[name].base_type
        try:
            bins = evaluate(spec.count, {}) if spec is not None else None
        except ValueError:
            bins = None
        if spec is None or not isinstance(bins, int) or bins <= 0:
            return NotApplicable(f"`{name}` has no constant size in the spec")
        if elem not in _SHARED_ATOMIC_TYPES or bins * dtype_bytes(spec.dtype) > SHARED_HISTOGRAM_BYTES:
            return NotApplicable(f"`{name}` is not a small array of a type shared-memory atomics support")
        spans = {(b.start_byte, b.end_byte) for b in bases}
        copy = HISTOGRAM_COPY
        renamed = _rebuild(subject, body, lambda n: copy if (n.start_byte, n.end_byte) in spans else None)
        # the body without its braces, one level deeper, its atomics now into the shared copy
        inner = "\n".join(("    " + line) if line.strip() else line for line in renamed[1:-1].split("\n"))
        ind = _indent(subject, body.named_children[0]) if body.named_children else "    "
        code = (
            "{\n"
            f"{ind}// cuda-agent: a per-block `{name}` in shared memory, added into `{name}` once per block\n"
            f"{ind}__shared__ {elem} {copy}[{bins}];\n"
            f"{ind}const int ca_tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);\n"
            f"{ind}const int ca_threads = blockDim.x * blockDim.y * blockDim.z;\n"
            f"{ind}for (int ca_k = ca_tid; ca_k < {bins}; ca_k += ca_threads) {copy}[ca_k] = 0;\n"
            f"{ind}__syncthreads();\n"
            f"{ind}{{{inner}{ind}}}\n"
            f"{ind}__syncthreads();\n"
            f"{ind}for (int ca_k = ca_tid; ca_k < {bins}; ca_k += ca_threads)\n"
            f"{ind}    if ({copy}[ca_k] != 0) atomicAdd(&{name}[ca_k], {copy}[ca_k]);\n"
            "}"
        )
        out = _with_body(subject, body, code)
        what = f"shared-memory histogram of `{name}` ({bins} bins)"
        if launch is not None:
            what += f" over a grid-stride loop{_capped(self.max_blocks)}"
        return Rewrite(out, what, launch)


# --------------------------------------------------------------------------------------- fast math

_INTRINSICS = {
    "expf": "__expf",
    "logf": "__logf",
    "log2f": "__log2f",
    "log10f": "__log10f",
    "sinf": "__sinf",
    "cosf": "__cosf",
    "tanf": "__tanf",
    "powf": "__powf",
    "tanhf": "__tanhf",  # CUDA 13's MUFU.TANH
}
_FLOAT_LITERAL = re.compile(r"^\d+(\.\d*)?([eE][-+]?\d+)?[fF]$|^\.\d+([eE][-+]?\d+)?[fF]$")


@dataclass(frozen=True)
class FastMath(Transform):
    """Single-precision math through the SFU intrinsics (``expf`` -> ``__expf`` ...), and
    ``a / b`` -> ``__fdividef(a, b)`` where an operand is a float literal.  Less accurate: the
    sandbox's tolerance decides whether it stands."""

    def apply(self, subject: Subject) -> Outcome:
        body = subject.body
        if body is None:
            return NotApplicable("the kernel has no body")
        count = 0

        def sub(n: Node) -> str | None:
            nonlocal count
            if n.type == "call_expression":
                fn = n.child_by_field_name("function")
                args = n.child_by_field_name("arguments")
                if fn is not None and args is not None and _text(subject, fn) in _INTRINSICS:
                    count += 1
                    return _INTRINSICS[_text(subject, fn)] + _rebuild(subject, args, sub)
            if n.type == "binary_expression" and n.child_by_field_name("operator") is not None:
                op = n.child_by_field_name("operator")
                left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
                if (
                    op is not None
                    and _text(subject, op) == "/"
                    and left is not None
                    and right is not None
                    and any(_FLOAT_LITERAL.match(_text(subject, s)) for s in (left, right))
                ):
                    count += 1
                    return f"__fdividef({_rebuild(subject, left, sub)}, {_rebuild(subject, right, sub)})"
            return None

        new_body = _rebuild(subject, body, sub)
        if not count:
            return NotApplicable("no single-precision math function or float division to replace")
        code = _with_body(subject, body, new_body)
        return Rewrite(code, f"fast-math intrinsics ({count} call(s))")


def safe_apply(transform: Transform, subject: Subject) -> Subject | NotApplicable:
    """``subject`` with ``transform`` applied; any exception inside the transformation (a bug, or
    code it does not understand), or a rewrite that no longer holds a kernel, becomes
    ``NotApplicable("internal error: ...")``, logged with the kernel, so that one transformation
    never ends a search."""
    try:
        out = transform.apply(subject)
        if isinstance(out, NotApplicable):
            return out
        after = subject.then(out)
        after.kernel  # noqa: B018 - raises when the rewrite lost the kernel
        return after
    except Exception as e:  # any failure of a pass is a verdict, never a crash
        name = subject.doc.kernels[-1].name if subject.doc.kernels else "?"
        log.warning("%r failed on kernel %s: %r", transform, name, e, exc_info=True)
        return NotApplicable(f"internal error: {type(e).__name__}: {e}")


def apply_all(subject: Subject, transforms: tuple[Transform, ...]) -> Subject | NotApplicable:
    """Apply ``transforms`` in order; the first that does not apply ends it (with its reason)."""
    for t in transforms:
        out = safe_apply(t, subject)
        if isinstance(out, NotApplicable):
            return NotApplicable(f"{getattr(t, 'name', '') or type(t).__name__}: {out.reason}")
        subject = out
    return subject


__all__ = [
    "BlockSize",
    "FastMath",
    "GridStride",
    "LaunchBounds",
    "NotApplicable",
    "ReadOnlyLoads",
    "RestrictConst",
    "Rewrite",
    "SharedHistogram",
    "Subject",
    "Transform",
    "Unroll",
    "Vectorize",
    "WarpReduction",
    "apply_all",
    "safe_apply",
]
