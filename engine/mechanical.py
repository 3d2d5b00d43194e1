"""The mechanical transformations the search composes with the passes: the launch
(:class:`BlockSize`, :class:`LaunchBounds`), pointers (:class:`RestrictConst`,
:class:`ReadOnlyLoads`), loops (:class:`Unroll`) and math (:class:`FastMath`).  Each edits the
kernel through the :class:`~engine.passes.Emitter`; none changes what the kernel computes
(FastMath within the sandbox's tolerance)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import tree_sitter

from cudasrc.launch import LaunchChange
from cudasrc.specs import ArraySpec, render_dims
from engine import (
    NotApplicable,
    Outcome,
    Subject,
    Transform,
    Transformed,
    _block_names,
    _constant_block,
)
from engine.histogram import HISTOGRAM_STEM
from engine.passes import Emitter
from engine.view import KernelView, written

Node = tree_sitter.Node


def _static_shared(subject: Subject) -> bool:
    """Whether the body declares static ``__shared__`` arrays (other than :class:`SharedHistogram`'s,
    whose size does not depend on the block)."""
    view = subject.view
    return any(
        "extern" not in (tokens := view.tokens(n))
        and "[" in tokens
        and not any(t.startswith(f"ca_{HISTOGRAM_STEM}") for t in tokens)
        for n in view.shared
    )


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
        # an array sized over the block (a partial sum per block) would hold other values, and the
        # comparison keeps the written block's arrays
        sized = [a for a in subject.spec.args if isinstance(a, ArraySpec) and _block_names(a.count)]
        if sized:
            return NotApplicable(
                f"`{sized[0].name}[{sized[0].count}]` follows the block: another one changes its contents"
            )
        if subject.kernel.launch_bounds is not None:
            return NotApplicable("__launch_bounds__ fixes the block size")
        block = render_dims(tuple(str(b) for b in self.block))
        if block == render_dims(subject.block):
            return NotApplicable(f"the block is already {block}")
        return Transformed(subject.code, f"block {block}", LaunchChange(block=block))


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
        em = Emitter(subject.view)
        em.edit(k.name_span.start_byte, k.name_span.start_byte, f"__launch_bounds__({arg}) ")
        return em.rewrite(f"__launch_bounds__({arg})")


# --------------------------------------------------------------------------------------- pointers


@dataclass(frozen=True)
class RestrictConst(Transform):
    """``__restrict__`` on every array parameter, ``const`` on the ones the spec reads only."""

    def apply(self, subject: Subject) -> Outcome:
        arrays = subject.arrays()
        em = Emitter(subject.view)
        for p in subject.kernel.params:
            a = arrays.get(p.name)
            if a is None or p.reference:
                continue
            const = p.const or a.role == "in"
            if p.restrict and const == p.const:
                continue
            text = f"{'const ' if const else ''}{p.base_type}* __restrict__ {p.name}"
            em.edit(p.span.start_byte, p.span.end_byte, text)
        if not em.edits:
            return NotApplicable("every array parameter is already __restrict__ (and const where read-only)")
        names = list(arrays)
        assumption = (
            f"{', '.join(names[:-1])} and {names[-1]} never alias"
            if len(names) > 1
            else f"{names[0]} is not aliased"
        )
        return replace(em.rewrite("__restrict__/const pointers"), assumptions=(assumption,))


_LDG_TYPES = frozenset(
    {"float", "double", "int", "unsigned int", "unsigned", "long long", "unsigned long long", "short", "char"}
    | {f"{t}{n}" for t in ("float", "int", "uint") for n in (2, 4)}
    | {"double2", "longlong2"}
)


def _subscript_base(view: KernelView, node: Node) -> str:
    """The array a subscript reads: ``a`` for ``a[i]`` and ``reinterpret_cast<const float4*>(a)[v]``."""
    arg = node.child_by_field_name("argument")
    if arg is None:
        return ""
    if arg.type == "identifier":
        return view.text(arg)
    if arg.type == "call_expression" and "reinterpret_cast" in view.tokens(arg):
        args = arg.child_by_field_name("arguments")
        inner = args.named_children if args is not None else []
        if len(inner) == 1 and inner[0].type == "identifier":
            return view.text(inner[0])
    return ""


@dataclass(frozen=True)
class ReadOnlyLoads(Transform):
    """Loads of ``in`` arrays through the read-only data cache: ``a[i]`` -> ``__ldg(&a[i])``."""

    def apply(self, subject: Subject) -> Outcome:
        view = subject.view
        em = Emitter(view)
        inputs = {
            p.name
            for p in subject.kernel.params
            if p.pointer == 1
            and subject.arrays().get(p.name, ArraySpec("", "out", "", "")).role == "in"
            and view.element_type(p.name) in _LDG_TYPES
        }
        if not inputs:
            return NotApplicable("no `in` array of a type __ldg loads")
        count = 0

        def sub(n: Node) -> str | None:
            nonlocal count
            if n.type == "subscript_expression" and _subscript_base(view, n) in inputs and not written(n):
                count += 1
                return f"__ldg(&{em.substitute(n, sub)})"
            if n.type == "call_expression" and view.text(n).startswith("__ldg"):
                return view.text(n)
            return None

        em.replace(view.body, em.substitute(view.body, sub))
        if not count:
            return NotApplicable("no plain loads of `in` arrays")
        return em.rewrite(f"__ldg on {count} load(s)")


# --------------------------------------------------------------------------------------- loops


@dataclass(frozen=True)
class Unroll(Transform):
    """``#pragma unroll N`` before every ``for`` loop of the body that has no pragma."""

    factor: int = 4

    def apply(self, subject: Subject) -> Outcome:
        view = subject.view
        em = Emitter(view)
        for lp in view.loops:
            prev = lp.node.prev_named_sibling
            arg = prev.child_by_field_name("argument") if prev is not None else None
            if (
                prev is not None
                and prev.type == "preproc_call"
                and arg is not None
                and "unroll" in view.text(arg).split()
            ):
                continue
            em.insert_before(lp.node, f"#pragma unroll {self.factor}\n{em.indent(lp.node)}")
        if not em.edits:
            return NotApplicable("no `for` loop without a pragma")
        return em.rewrite(f"#pragma unroll {self.factor}")


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


def _float_literal(token: str) -> bool:
    """Whether a number literal token is a single-precision one (``2.0f``, ``1e-3f``, ``.5f``)."""
    if not token.endswith(("f", "F")) or token.lower().startswith("0x"):
        return False
    try:
        float(token[:-1])
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class FastMath(Transform):
    """Single-precision math through the SFU intrinsics (``expf`` -> ``__expf`` ...), and
    ``a / b`` -> ``__fdividef(a, b)`` where an operand is a float literal.  Less accurate: the
    sandbox's tolerance decides whether it stands."""

    def apply(self, subject: Subject) -> Outcome:
        view = subject.view
        em = Emitter(view)
        count = 0

        def sub(n: Node) -> str | None:
            nonlocal count
            if n.type == "call_expression":
                fn = n.child_by_field_name("function")
                args = n.child_by_field_name("arguments")
                if fn is not None and args is not None and view.text(fn) in _INTRINSICS:
                    count += 1
                    return _INTRINSICS[view.text(fn)] + em.substitute(args, sub)
            if n.type == "binary_expression" and n.child_by_field_name("operator") is not None:
                op = n.child_by_field_name("operator")
                left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
                if (
                    op is not None
                    and view.text(op) == "/"
                    and left is not None
                    and right is not None
                    and any(
                        s.type == "number_literal" and _float_literal(view.text(s)) for s in (left, right)
                    )
                ):
                    count += 1
                    return f"__fdividef({em.substitute(left, sub)}, {em.substitute(right, sub)})"
            return None

        em.replace(view.body, em.substitute(view.body, sub))
        if not count:
            return NotApplicable("no single-precision math function or float division to replace")
        return em.rewrite(f"fast-math intrinsics ({count} call(s))")
