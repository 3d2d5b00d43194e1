"""Kernel specs: how to verify and benchmark a kernel, written as a comment block above it.

Grammar (one directive per ``// @cuda-agent`` line, directly above the kernel; see README
"Kernel spec")::

    sizes     NAME=EXPR ...  [verify NAME=EXPR[,EXPR...] ...]
    verify    NAME=EXPR[,EXPR...] ...           one problem per comma position (repeatable)
    launch    [grid=DIM] [block=DIM] [smem=EXPR]  DIM: EXPR or (EXPR, EXPR[, EXPR])
    arg       NAME in|out|inout DTYPE[EXPR] [DIST]
    arg       NAME = EXPR                       a scalar parameter's value
    const     NAME DTYPE[EXPR] [DIST]           initial contents of a __constant__/__device__ array
    template  ARG, ARG...                       the instantiation to compile and launch
    tolerance [atol=NUM] [rtol=NUM]
    work      [bytes=EXPR] [flops=EXPR]         for GB/s, GFLOP/s and the roofline
    DIST:     uniform(lo, hi) | normal | randint(lo, hi) | const(v) | arange

Expressions are integer arithmetic over the size variables (and, in ``launch``/``work``/counts,
``block``, ``block_x``, ``block_y``, ``block_z``): ``+ - * / // % << >>``, parentheses,
``min``, ``max``, ``cdiv``.  ``/`` divides like C (integer division on integers).  They are
evaluated by walking a Python AST against that whitelist; nothing is ever ``eval``'d.

Positions (``line``) are 0-based lines of the file, like :mod:`agent.source`.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from agent.source import Document, Kernel, Param
from sandbox.contract import ArgSpec, ConstantInit, Distribution, DistKind, Launch, Problem, Tolerance

MARKER = "@cuda-agent"
Confidence = Literal["high", "medium", "low"]
ArrayRole = Literal["in", "out", "inout"]

# ---------------------------------------------------------------------------------------- dtypes

_C_TYPES: dict[str, str] = {
    "float": "float32",
    "double": "float64",
    "__half": "float16",
    "half": "float16",
    "__nv_bfloat16": "bfloat16",
    "nv_bfloat16": "bfloat16",
    "bool": "bool",
    "char": "int8",
    "signed char": "int8",
    "int8_t": "int8",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "short": "int16",
    "short int": "int16",
    "int16_t": "int16",
    "unsigned short": "uint16",
    "unsigned short int": "uint16",
    "uint16_t": "uint16",
    "int": "int32",
    "signed": "int32",
    "signed int": "int32",
    "int32_t": "int32",
    "unsigned": "uint32",
    "unsigned int": "uint32",
    "uint32_t": "uint32",
    "long": "int64",
    "long int": "int64",
    "long long": "int64",
    "long long int": "int64",
    "int64_t": "int64",
    "ptrdiff_t": "int64",
    "ssize_t": "int64",
    "unsigned long": "uint64",
    "unsigned long int": "uint64",
    "unsigned long long": "uint64",
    "unsigned long long int": "uint64",
    "uint64_t": "uint64",
    "size_t": "uint64",
    "__half2": "half2",
    "half2": "half2",
    "__nv_bfloat162": "bfloat162",
    "nv_bfloat162": "bfloat162",
}
_SCALAR_BYTES = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "bool": 1,
    **{f"{s}int{b}": b // 8 for s in ("", "u") for b in (8, 16, 32, 64)},
}
# CUDA vector types: float2, int4, uchar4, ... -> (canonical lane type, lanes)
_VECTOR_LANES: dict[str, tuple[str, int]] = {
    "half2": ("float16", 2),
    "bfloat162": ("bfloat16", 2),
    **{
        f"{c}{n}": (lane, n)
        for c, lane in (
            ("float", "float32"),
            ("double", "float64"),
            ("char", "int8"),
            ("uchar", "uint8"),
            ("short", "int16"),
            ("ushort", "uint16"),
            ("int", "int32"),
            ("uint", "uint32"),
            ("long", "int64"),
            ("ulong", "uint64"),
            ("longlong", "int64"),
            ("ulonglong", "uint64"),
        )
        for n in (1, 2, 3, 4)
    },
}


def canonical_dtype(type_text: str) -> str | None:
    """The canonical dtype name (sandbox.contract.ArgSpec) of a C/CUDA type or canonical name."""
    t = " ".join(type_text.replace("const", " ").replace("volatile", " ").split())
    t = t.removeprefix("std::")
    if t in _SCALAR_BYTES or t in _VECTOR_LANES:
        return t
    return _C_TYPES.get(t)


def dtype_bytes(dtype: str) -> int:
    if dtype in _VECTOR_LANES:
        lane, n = _VECTOR_LANES[dtype]
        return _SCALAR_BYTES[lane] * n
    return _SCALAR_BYTES[dtype]


def is_float(dtype: str) -> bool:
    lane = _VECTOR_LANES[dtype][0] if dtype in _VECTOR_LANES else dtype
    return lane.startswith(("float", "bfloat"))


# ---------------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class SpecError:
    """A mistake in a spec, at a 0-based line of the file."""

    line: int
    message: str


class InvalidSpec(ValueError):
    """Raised by :func:`problem` when a spec cannot be resolved for the given sizes/block."""

    def __init__(self, errors: tuple[SpecError, ...]) -> None:
        super().__init__("; ".join(f"line {e.line + 1}: {e.message}" for e in errors))
        self.errors = errors


@dataclass(frozen=True)
class DistSpec:
    """An input distribution with expression arguments (``randint(0, n)``), resolved per size."""

    kind: DistKind = "uniform"
    args: tuple[str, ...] = ()

    def text(self) -> str:
        return f"{self.kind}({', '.join(self.args)})" if self.args else self.kind


@dataclass(frozen=True)
class ArraySpec:
    name: str
    role: ArrayRole
    dtype: str
    count: str
    dist: DistSpec = field(default_factory=DistSpec)
    line: int = -1


@dataclass(frozen=True)
class ScalarSpec:
    name: str
    dtype: str
    value: str
    line: int = -1


@dataclass(frozen=True)
class ConstantSpec:
    name: str
    dtype: str
    count: str
    dist: DistSpec = field(default_factory=DistSpec)
    line: int = -1


@dataclass(frozen=True)
class KernelSpec:
    """A kernel's spec as written (expressions unevaluated).  ``lines`` maps a directive
    (``sizes``, ``launch``, ``work``, ``template``, ``tolerance``) to its 0-based line."""

    kernel: str  # qualified kernel name
    sizes: dict[str, str]  # benchmark values, in order
    verify: tuple[dict[str, str], ...] = ()  # overrides of sizes, one dict per verify problem
    grid: tuple[str, ...] = ("cdiv(n, block)",)
    block: tuple[str, ...] = ("256",)
    smem: str = "0"
    args: tuple[ArraySpec | ScalarSpec, ...] = ()
    constants: tuple[ConstantSpec, ...] = ()
    template_args: tuple[str, ...] = ()
    tolerance: Tolerance | None = None
    bytes: str = ""  # "" -> sum of the arrays' sizes (inout counted twice)
    flops: str = ""
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def name_expression(self) -> str:
        """The NVRTC name expression: ``k`` or ``k<float, 256>``."""
        return f"{self.kernel}<{', '.join(self.template_args)}>" if self.template_args else self.kernel


@dataclass(frozen=True)
class Inference:
    """A spec proposed from the code, and how sure we are of it (never trusted silently)."""

    spec: KernelSpec
    confidence: Confidence
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class SpecResult:
    """What the server and the CLI show for a kernel: the written spec, or an inferred one."""

    kernel: str
    source: Literal["parsed", "inferred"]
    spec: KernelSpec | None
    errors: tuple[SpecError, ...] = ()
    inference: Inference | None = None
