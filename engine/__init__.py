"""Source transformations of the built-in optimizer: the values they share, no transformation.

A :class:`Subject` is a kernel definition (its text, as in :attr:`agent.target.Target.definition`),
its spec, its standalone unit (``context``: the macros, aliases and ``__device__`` functions the
front end resolves, :mod:`engine.frontend`) and what earlier transformations changed
(launch configuration, assumptions).  A transformation's :meth:`Transform.apply` returns a
:class:`Transformed` (new definition text, and optionally a :class:`~cudasrc.launch.LaunchChange` in the
spec's vocabulary) or :class:`NotApplicable` with the reason.  ``subject.then(rewrite)`` chains
them, so the search in :mod:`agent.builtin` composes any sequence.

Where the transformations live:

- every structural rewrite is a pass, one file each, listed in :mod:`engine.registry`
  (protocol: :mod:`engine.passes`): the tiled dot product, row-parallel reductions,
  same-layout reductions, the tiled transpose, the grid-stride loop and vector packs
  (:mod:`~engine.elementwise`), the warp-shuffle tree reduction
  (:mod:`~engine.warp_reduction`), the shared-memory histogram
  (:mod:`~engine.histogram`) ...;
- the mechanical arms the search composes with them (block size, ``__launch_bounds__``,
  ``__restrict__``/``const``, ``__ldg``, ``#pragma unroll``, fast math) are in
  :mod:`engine.mechanical`.

Correctness is decided by the sandbox, which verifies every candidate against the original; the
transformations only refuse what they cannot do right.
"""

from __future__ import annotations

import abc
import ast
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

import tree_sitter

from cudasrc.launch import LaunchChange
from cudasrc.source import Document
from cudasrc.specs import ArraySpec, KernelSpec, evaluate, parse_dims
from cudasrc.specs.rendering import render_dims
from cudasrc.syntax import Kernel
from engine.frontend import Context, context_of, normalized_code
from engine.view import KernelView

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
    context: str = ""  # the kernel's standalone unit (macros, aliases, __device__ functions)

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
    def view(self) -> KernelView[Subject]:
        """The kernel's read-only analysis (:mod:`engine.view`), built once."""
        return KernelView(self)

    @cached_property
    def front(self) -> Context:
        """The names the kernel's unit defines, resolved (:mod:`engine.frontend`)."""
        return context_of(self)

    @cached_property
    def normalized(self) -> Subject:
        """This subject with its definition normalized (device functions inlined, loops in
        canonical form; :func:`engine.frontend.normalized_code`); passes match and rewrite it."""
        code = normalized_code(self)
        if code == self.code:
            return self
        out = replace(self, code=code)
        try:
            out.kernel  # noqa: B018 - a normalization that lost the kernel is not used
        except ValueError:
            return self
        return out

    @property
    def block(self) -> tuple[str, ...]:
        """The block dimensions in force (the spec's, or the last launch change's)."""
        return parse_dims(self.launch.block) if self.launch.block else self.spec.block

    @property
    def grid(self) -> tuple[str, ...]:
        """The grid dimensions in force, written over the block wherever the written grid
        follows it (:func:`grid_over_block`: ``cdiv(rows, 64)`` with a block of 64 is
        ``cdiv(rows, block)``), so a launch written with numbers, macros or ``constexpr``\\ s is
        as free to change as one written over ``block``."""
        grid = parse_dims(self.launch.grid) if self.launch.grid else self.spec.grid
        counts = tuple(a.count for a in self.spec.args if isinstance(a, ArraySpec))
        return grid_over_block(grid, self.block, counts)

    def arrays(self) -> dict[str, ArraySpec]:
        """The spec's arrays that are parameters of the kernel (pointer parameters), by name."""
        params = {p.name for p in self.kernel.params if p.pointer == 1}
        return {a.name: a for a in self.spec.args if isinstance(a, ArraySpec) and a.name in params}

    def then(self, rewrite: Transformed) -> Subject:
        """This subject with ``rewrite`` applied (launch changes merge, later fields win)."""
        new = rewrite.launch or LaunchChange()
        grid = new.grid or self.launch.grid
        written = parse_dims(self.launch.grid) if self.launch.grid else self.spec.grid
        if new.block and not new.grid and self.grid != written:
            # a grid written with the block's number (``cdiv(w, 16)`` at block 16) follows a new
            # block only if the change says so: the relaunch reads the spec's grid as written
            grid = render_dims(self.grid)
        launch = LaunchChange(
            grid=grid,
            block=new.block or self.launch.block,
            shared=new.shared or self.launch.shared,
        )
        extra = tuple(a for a in rewrite.assumptions if a not in self.assumptions)
        return Subject(
            rewrite.code,
            self.spec,
            launch,
            self.assumptions + extra,
            (*self.applied, rewrite.description),
            self.context,
        )


@dataclass(frozen=True)
class Transformed:
    """A transform's result: the kernel's new definition, what changed, and its launch change."""

    code: str
    description: str
    launch: LaunchChange | None = None
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True)
class NotApplicable:
    reason: str


Outcome = Transformed | NotApplicable


class Transform(abc.ABC):
    """One transformation with its parameters (a frozen dataclass)."""

    @abc.abstractmethod
    def apply(self, subject: Subject) -> Outcome: ...


# --------------------------------------------------------------------------------------- helpers


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


def grid_over_block(
    grid: tuple[str, ...], block: tuple[str, ...], counts: tuple[str, ...] = ()
) -> tuple[str, ...]:
    """``grid`` with the block's constant size written as the spec's name for it (``block`` for
    1-D blocks, ``block_x``/``block_y``/``block_z`` along each axis) in every dimension that
    depends on the problem's sizes and does not name the block already: the same launch at the
    written block, one that follows a new block.  A constant grid dimension (``grid=64``: a
    fixed number of blocks) keeps its number, and so does a grid whose number is also in an
    array's element count (``counts``: ``partial[cdiv(n, 256)]``, one output per block of 256)."""
    sizes = constant_dims(block)
    if sizes is None or any(_block_names(g) for g in grid):
        return grid
    tied = {n.value for c in counts for n in _constants(c)}
    out = []
    for axis, g in enumerate(grid):
        try:
            tree = ast.parse(g, mode="eval")
        except (SyntaxError, ValueError, RecursionError):
            return grid
        size = sizes[axis] if axis < len(sizes) else 1
        name = "block" if len(sizes) == 1 else f"block_{'xyz'[axis]}"
        calls = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        sized = any(isinstance(n, ast.Name) and id(n) not in calls for n in ast.walk(tree))
        if size == 1 or size in tied or not sized:
            out.append(g)
            continue
        out.append(ast.unparse(_Named(size, name).visit(tree)))
    return tuple(out)


class _Named(ast.NodeTransformer):
    """Replace the integer ``size`` by the name ``name`` in a spec expression."""

    def __init__(self, size: int, name: str) -> None:
        self.size, self.name = size, name

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Name(self.name) if type(node.value) is int and node.value == self.size else node


def _constants(expr: str) -> list[ast.Constant]:
    try:
        return [n for n in ast.walk(ast.parse(expr, mode="eval")) if isinstance(n, ast.Constant)]
    except (SyntaxError, ValueError, RecursionError):
        return []


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


def _constant_block(subject: Subject) -> int | None:
    """Threads per block when every block dimension is a constant."""
    return _constant_product(subject.block)


def constant_dims(dims: tuple[str, ...]) -> tuple[int, ...] | None:
    """Launch dimensions as integers when every one is a positive integer constant."""
    out = []
    for d in dims:
        try:
            v = evaluate(d, {})
        except ValueError:
            return None
        if not isinstance(v, int) or v <= 0:
            return None
        out.append(v)
    return tuple(out)


def _constant_product(dims: tuple[str, ...]) -> int | None:
    """The product of launch dimensions when every one is a positive integer constant."""
    values = constant_dims(dims)
    return math.prod(values) if values is not None else None


def _inside(node: Node, outer: Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


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


__all__ = ["NotApplicable", "Outcome", "Subject", "Transform", "Transformed", "apply_all", "safe_apply"]
