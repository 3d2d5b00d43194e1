"""Kernel specs: how to verify and benchmark a kernel, written as a comment block above it.

Grammar (one directive per ``// @cuda-agent`` line, directly above the kernel; see README
"Kernel spec")::

    sizes     NAME=EXPR ...  [verify NAME=EXPR[,EXPR...] ...]
    verify    NAME=EXPR[,EXPR...] ...           one problem per comma position (repeatable)
    launch    [grid=DIM] [block=DIM] [smem=EXPR]  DIM: EXPR or (EXPR, EXPR[, EXPR])
    arg       NAME in|out|inout DTYPE[EXPR] [DIST] [offset=EXPR]   offset: elements into the array
    arg       NAME = EXPR                       a scalar parameter's value (NULL for a pointer)
    const     NAME DTYPE[EXPR] [DIST]           initial contents of a __constant__/__device__ array
    compare   NAME[IDX < EXPR, ...] where COND  the output's compared elements (``NAME where COND``
                                                over the flat index ``i``; ``NAME written``: what
                                                the original writes); the rest are don't-care
    define    NAME=EXPR ...                     -D macros per problem (compile-time sizes)
    template  ARG, ARG...                       the instantiation to compile and launch
    tolerance [arg=NAME] [atol=NUM] [rtol=NUM] [norm=NUM]   override of the calibrated bounds
    precision allow=KIND[,KIND...]              tf32, fp16, bf16, mma, fast-math
    require   CONDITION                         a constraint on sizes, block and ``bytes``
    work      [bytes=EXPR] [flops=EXPR] [floor=off]   for GB/s, GFLOP/s and the roofline;
                                                ``floor=off``: the counts overstate the traffic,
                                                so no time is refused as implausible
    DIST:     uniform(lo, hi) | normal | randint(lo, hi) | const(v) | arange | copy(ARG) | values(EXPR)

Expressions are integer arithmetic over the size variables (and, in ``launch``/``work``/counts,
``block``, ``block_x``, ``block_y``, ``block_z``): ``+ - * / // % << >>``, parentheses,
``min``, ``max``, ``cdiv``.  ``/`` divides like C (integer division on integers).  They are
evaluated by walking a Python AST against that whitelist; nothing is ever ``eval``'d.  Element
expressions (``compare ... where``, ``values``) are resolved with the sizes substituted and evaluated
by the worker over index arrays (:mod:`sandbox.expr`).

Positions (``line``) are 0-based lines of the file, like :mod:`agent.source`.
"""

from __future__ import annotations

import ast
import difflib
import math
import operator
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, cast

import tree_sitter

from agent import host
from agent.source import Document
from agent.syntax import Kernel, Param
from sandbox.contract import (
    MATH_CONSTANTS,
    PRECISIONS,
    ArgSpec,
    ConstantInit,
    DistKind,
    Distribution,
    Launch,
    Problem,
    Region,
    Tolerance,
    expression_error,
)
from sandbox.errors import InputError

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
    "uint": "uint32",  # glibc's <sys/types.h> names, common in CUDA samples
    "ushort": "uint16",
    "uchar": "uint8",
    "ulong": "uint64",
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


def canonical_dtype(type_text: str, aliases: Mapping[str, str] | None = None) -> str | None:
    """The canonical dtype name (sandbox.contract.ArgSpec) of a C/CUDA type or canonical name,
    seeing through the file's ``typedef``/``using`` aliases."""
    t = " ".join(type_text.replace("const", " ").replace("volatile", " ").split())
    for _ in range(4):
        t = t.removeprefix("std::")
        if t in _SCALAR_BYTES or t in _VECTOR_LANES:
            return t
        if t in _C_TYPES:
            return _C_TYPES[t]
        if not aliases or t not in aliases:
            return None
        t = " ".join(aliases[t].split())
    return None


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


class InvalidSpec(InputError, ValueError):
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
    offset: str = "0"  # the kernel's pointer is this many elements into the array


@dataclass(frozen=True)
class CompareSpec:
    """``compare NAME[i < E, ...] where COND`` or ``compare NAME written``: the elements of an
    output that verification compares (the rest are don't-care).  ``index``/``extents``: one
    name and extent per dimension, outermost first (``("i",)``/``()``: the flat element index)."""

    name: str
    index: tuple[str, ...] = ("i",)
    extents: tuple[str, ...] = ()
    where: str = ""
    written: bool = False
    line: int = -1

    def text(self) -> str:
        dims = ", ".join(f"{i} < {e}" for i, e in zip(self.index, self.extents, strict=False))
        head = f"{self.name}[{dims}]" if self.extents else self.name
        return f"{head} written" if self.written else f"{head} where {self.where}"


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
    tolerance: Tolerance | None = None  # for every output
    output_tolerances: tuple[Tolerance, ...] = ()  # per output (``arg`` set)
    allow_precision: tuple[str, ...] = ()  # lower precisions a rewrite may use (``precision allow=``)
    bytes: str = ""  # "" -> sum of the arrays' sizes (inout counted twice)
    flops: str = ""
    floor: bool = True  # ``work floor=off``: the counts may overstate the work (no physics floor)
    requires: tuple[tuple[str, int], ...] = ()  # (condition, line): constraints on sizes and launch
    compares: tuple[CompareSpec, ...] = ()  # outputs' cared-for elements
    defines: dict[str, str] = field(default_factory=dict)  # macro -> value per problem (``define``)
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def name_expression(self) -> str:
        """The NVRTC name expression: ``k`` or ``k<float, 256>``."""
        return f"{self.kernel}<{', '.join(self.template_args)}>" if self.template_args else self.kernel


@dataclass(frozen=True)
class Evidence:
    """Where an inferred field comes from.  ``field``: ``size NAME``, ``launch``, ``template``,
    ``arg NAME`` or ``const NAME``; ``where``: ``file:line`` ("" for a guess); ``note``: why it is
    not certain (a loop's first iteration, a default)."""

    field: str
    where: str
    confidence: Confidence
    note: str = ""


@dataclass(frozen=True)
class Inference:
    """A spec proposed from the code, and how sure we are of it (never trusted silently)."""

    spec: KernelSpec
    confidence: Confidence
    reasons: tuple[str, ...]
    evidence: tuple[Evidence, ...] = ()

    def guesses(self) -> dict[str, str]:
        """Field -> note, for every field that is not certain."""
        return {e.field: e.note or "guessed" for e in self.evidence if e.confidence != "high"}


@dataclass(frozen=True)
class SpecResult:
    """What the server and the CLI show for a kernel: the written spec, or an inferred one."""

    kernel: str
    source: Literal["parsed", "inferred"]
    spec: KernelSpec | None
    errors: tuple[SpecError, ...] = ()
    inference: Inference | None = None


# ---------------------------------------------------------------------------------------- expressions

Number = int | float


def _cdiv(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return math.ceil(a / b)


def _cdivision(a: Number, b: Number) -> Number:
    """C's ``/``: truncating on integers, true division on floats."""
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _shift(op: Callable[[int, int], int]) -> Callable[[Number, Number], Number]:
    def apply(a: Number, b: Number) -> Number:
        if not isinstance(a, int) or not isinstance(b, int) or not 0 <= b < 64:
            raise ValueError("shifts take integers and a shift count in 0..63")
        return op(a, b)

    return apply


_BINOPS: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _cdivision,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.LShift: _shift(operator.lshift),
    ast.RShift: _shift(operator.rshift),
}


def _pow(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int) and b >= 0:
        if abs(a) > 1 and b > 62:
            raise ValueError("value out of range")
        return a**b
    return math.pow(a, b)


def _sqrt(a: Number) -> Number:
    if a < 0:
        raise ValueError(f"sqrt of a negative number ({a})")
    return math.sqrt(a)


_COMPARE: dict[type[ast.cmpop], Callable[[Number, Number], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}


def _pow2(a: Number) -> Number:
    return int(isinstance(a, int) and a > 0 and a & (a - 1) == 0)


# name -> (function, minimum arguments, maximum arguments)
_FUNCS: dict[str, tuple[Callable[..., Number], int, int]] = {
    "min": (min, 2, 16),
    "max": (max, 2, 16),
    "cdiv": (_cdiv, 2, 2),
    "pow": (_pow, 2, 2),
    "sqrt": (_sqrt, 1, 1),
    "abs": (abs, 1, 1),
    "exp": (math.exp, 1, 1),
    "log": (math.log, 1, 1),
    "log2": (math.log2, 1, 1),
    "pow2": (_pow2, 1, 1),
}
# constants of <cmath>/<cfloat>/<climits> that specs may name (INFINITY only where values may be infinite)
CONSTANTS: dict[str, Number] = {
    **MATH_CONSTANTS,
    "NULL": 0,  # `arg p = NULL`: a null pointer argument
}
_NULLS = frozenset({"NULL", "nullptr", "0"})
_LIMIT = 1 << 62  # keeps a hostile expression from building huge integers


def evaluate(expr: str, env: Mapping[str, Number], *, finite: bool = True) -> Number:
    """Evaluate a spec expression; raises ValueError with a readable message (and nothing else,
    whatever the text).  ``finite=False`` lets the value be ``INFINITY``/``NAN`` (scalar values)."""
    if len(expr) > 500:
        raise ValueError("expression longer than 500 characters")
    text = expr.strip()
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ValueError(
            f"`{text}` is not an expression ({getattr(exc, 'msg', 'too deeply nested')})"
        ) from None
    try:
        value = _eval(tree.body, env)
    except ZeroDivisionError:
        raise ValueError(f"`{text}` divides by zero") from None
    except (ArithmeticError, TypeError, RecursionError):  # overflow of a float, math domain errors
        raise ValueError(f"`{text}` cannot be evaluated (a value is out of range)") from None
    if finite and isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"`{text}` is {value}, not a finite number")
    return value


def _checked(v: Number) -> Number:
    if isinstance(v, int) and abs(v) > _LIMIT:
        raise ValueError("value out of range (more than 2^62)")
    return v


def _eval(node: ast.AST, env: Mapping[str, Number]) -> Number:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return _checked(node.value)
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        if node.id in CONSTANTS:
            return CONSTANTS[node.id]
        known = ", ".join(sorted(env)) or "none"
        raise ValueError(f"unknown name `{node.id}` (known: {known})")
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _eval(node.left, env)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, env)
            if not _COMPARE[type(op)](left, right):
                return 0
            left = right
        return 1
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, env) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return int(not _eval(node.operand, env))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        v = _eval(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        return _checked(_BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        fn, low, high = _FUNCS[node.func.id]
        if node.keywords or not low <= len(node.args) <= high:
            arity = str(low) if low == high else f"{low} to {high}"
            raise ValueError(f"{node.func.id} takes {arity} arguments")
        values = [_eval(a, env) for a in node.args]
        try:
            return _checked(fn(*values))
        except ValueError as exc:
            if str(exc) != "math domain error":
                raise
            raise ValueError(
                f"`{ast.unparse(node)}` cannot be evaluated (outside the domain of {node.func.id})"
            ) from None
    raise ValueError(
        f"`{ast.unparse(node)}` is not allowed (use numbers, sizes, + - * / % << >>, comparisons, and/or/not, "
        f"{', '.join(_FUNCS)}, {', '.join(CONSTANTS)})"
    )


def _eval_int(expr: str, env: Mapping[str, Number], what: str) -> int:
    v = evaluate(expr, env)
    if isinstance(v, float):
        if not v.is_integer():
            raise ValueError(f"{what} `{expr}` is {v}, not an integer")
        v = int(v)
    _checked(v)
    return v


# ---------------------------------------------------------------------------------------- parsing

_PAIR_KEY = re.compile(r"(?<![<>!=\w])([A-Za-z_]\w*)\s*=(?!=)")
_ARRAY = re.compile(
    r"^(?P<name>\w+)\s+(?P<role>in|out|inout)\s+(?P<dtype>[\w:\s]+?)\s*\[(?P<count>.*)\]\s*(?P<dist>.*)$"
)
_SCALAR = re.compile(r"^(?P<name>\w+)\s*=\s*(?P<value>.+)$")
_CONST = re.compile(r"^(?P<name>\w+)\s+(?P<dtype>[\w:\s]+?)\s*\[(?P<count>.*)\]\s*(?P<dist>.*)$")
_DIST = re.compile(r"^(?P<kind>uniform|normal|randint|const|arange|copy|values)\s*(?:\((?P<args>.*)\))?$")
_DIST_ARITY = {
    "uniform": (2,),
    "normal": (0,),
    "randint": (2,),
    "const": (1,),
    "arange": (0,),
    "copy": (1,),
    "values": (1,),
}
_OFFSET = re.compile(r"(?:^|\s)offset\s*=(?!=)")


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside parentheses."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        depth += (ch in "([") - (ch in ")]")
        if ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur).strip())
    return parts


def _pairs(text: str) -> list[tuple[str, str]]:
    """``a=1<<24 b = cdiv(n, 2)`` -> [("a", "1<<24"), ("b", "cdiv(n, 2)")], keys at depth 0 only."""
    keys: list[re.Match[str]] = []
    depth = 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif (
            depth == 0
            and (ch.isalpha() or ch == "_")
            and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))
        ):
            m = _PAIR_KEY.match(text, i)
            if m:
                keys.append(m)
    if not keys or text[: keys[0].start()].strip():
        raise ValueError(f"expected NAME=VALUE pairs, got `{text.strip()}`")
    out = []
    for k, m in enumerate(keys):
        end = keys[k + 1].start() if k + 1 < len(keys) else len(text)
        value = text[m.end() : end].strip()
        if not value:
            raise ValueError(f"`{m.group(1)}=` has no value")
        out.append((m.group(1), value))
    return out


def _split_offset(text: str) -> tuple[str, str]:
    """``"uniform(-1, 1) offset=pad"`` -> ("uniform(-1, 1)", "pad"); no ``offset=``: (text, "0")."""
    depth = 0
    for i, ch in enumerate(text):
        depth += (ch in "([") - (ch in ")]")
        if depth == 0 and (m := _OFFSET.match(text, i)) and (i == 0 or ch.isspace()):
            value = text[m.end() :].strip()
            if not value:
                raise ValueError("`offset=` has no value")
            return text[:i], value
    return text, "0"


def parse_dims(text: str) -> tuple[str, ...]:
    """``"cdiv(n, block)"`` -> one dimension; ``"(a, b)"`` -> two; at most three (else ValueError)."""
    t = text.strip()
    if t.startswith("(") and t.endswith(")") and _split_top(t[1:-1]) and len(_split_top(t[1:-1])) > 1:
        dims = tuple(_split_top(t[1:-1]))
    else:
        dims = (t,)
    if not 1 <= len(dims) <= 3 or not all(dims):
        raise ValueError(f"`{t}` must be EXPR or (EXPR, EXPR[, EXPR])")
    return dims


def _dist(text: str) -> DistSpec:
    m = _DIST.match(text.strip())
    if not m:
        raise ValueError(
            f"unknown distribution `{text.strip()}` (uniform(lo,hi), normal, randint(lo,hi), const(v), "
            "arange, copy(ARG), values(EXPR))"
        )
    kind: DistKind = m["kind"]  # type: ignore[assignment]
    args = tuple(_split_top(m["args"])) if m["args"] and m["args"].strip() else ()
    if kind == "values" and m["args"] and m["args"].strip():
        args = (m["args"].strip(),)  # one expression, commas and all (`values(min(i, 7))`)
    if len(args) not in _DIST_ARITY[kind]:
        raise ValueError(f"{kind} takes {_DIST_ARITY[kind][0]} argument(s)")
    return DistSpec(kind, args)


class _Builder:
    """Accumulates directives of one comment block into a KernelSpec, collecting errors."""

    def __init__(self, kernel: Kernel, aliases: Mapping[str, str]) -> None:
        self.kernel = kernel
        self.aliases = aliases
        self.errors: list[SpecError] = []
        self.fields: dict[str, object] = {}
        self.sizes: dict[str, str] = {}
        self.verify: list[dict[str, str]] = []
        self.args: dict[str, ArraySpec | ScalarSpec] = {}
        self.constants: list[ConstantSpec] = []
        self.lines: dict[str, int] = {}
        self.mentioned: set[str] = set()  # parameters with an `arg` line, valid or not
        self.requires: list[tuple[str, int]] = []
        self.compares: list[CompareSpec] = []
        self.defines: dict[str, str] = {}

    def directive(self, line: int, text: str) -> None:
        keyword, _, rest = text.strip().partition(" ")
        handler = getattr(self, f"_d_{keyword}", None)
        if handler is None:
            self.errors.append(
                SpecError(
                    line,
                    f"unknown directive `{keyword}` (sizes, verify, launch, arg, const, template, tolerance, "
                    "precision, require, compare, define, work)",
                )
            )
            return
        try:
            handler(line, rest.strip())
        except ValueError as exc:
            self.errors.append(SpecError(line, f"{keyword}: {exc}"))

    def _d_sizes(self, line: int, rest: str) -> None:
        head, _, verify = rest.partition(" verify ")
        for name, value in _pairs(head):
            if name in self.sizes:
                raise ValueError(f"size `{name}` given twice")
            self.sizes[name] = value
        self.lines["sizes"] = line
        if verify:
            self._d_verify(line, verify)

    def _d_verify(self, line: int, rest: str) -> None:
        columns = [(name, _split_top(values)) for name, values in _pairs(rest)]
        count = max(len(v) for _, v in columns)
        for name, values in columns:
            if len(values) not in (1, count):
                raise ValueError(f"`{name}` has {len(values)} values, expected 1 or {count}")
        for i in range(count):
            self.verify.append(
                {name: values[i] if len(values) > 1 else values[0] for name, values in columns}
            )
        self.lines.setdefault("verify", line)

    def _d_launch(self, line: int, rest: str) -> None:
        for key, value in _pairs(rest):
            if key in ("grid", "block"):
                self.fields[key] = parse_dims(value)
            elif key == "smem":
                self.fields["smem"] = value
            else:
                raise ValueError(f"unknown key `{key}` (grid, block, smem)")
        self.lines["launch"] = line

    def _d_arg(self, line: int, rest: str) -> None:
        self.mentioned.add(rest.split("=")[0].split()[0] if rest.split() else "")
        if m := _SCALAR.match(rest):
            param = self._param(m["name"])
            value = m["value"].strip()
            if param.pointer and value not in _NULLS:
                raise ValueError(
                    f"`{m['name']}` is a pointer; write `arg {m['name']} in|out|inout DTYPE[COUNT]` "
                    f"(or `arg {m['name']} = NULL`)"
                )
            # a NULL pointer is passed as a 64-bit zero
            dtype = "uint64" if param.pointer else self._dtype(param.base_type)
            spec: ArraySpec | ScalarSpec = ScalarSpec(
                m["name"], dtype, "NULL" if param.pointer else value, line
            )
        elif m := _ARRAY.match(rest):
            param = self._param(m["name"])
            if not param.pointer:
                raise ValueError(f"`{m['name']}` is a scalar parameter; write `arg {m['name']} = EXPR`")
            tail, offset = _split_offset(m["dist"])
            dist = _dist(tail) if tail.strip() else None
            dtype = self._dtype(m["dtype"])
            role = cast(ArrayRole, m["role"])
            spec = ArraySpec(
                m["name"], role, dtype, m["count"].strip(), dist or default_dist(dtype), line, offset
            )
        else:
            raise ValueError(
                "expected `arg NAME in|out|inout DTYPE[COUNT] [DIST] [offset=EXPR]` or `arg NAME = EXPR`"
            )
        if spec.name in self.args:
            raise ValueError(f"`{spec.name}` described twice")
        self.args[spec.name] = spec

    def _d_const(self, line: int, rest: str) -> None:
        m = _CONST.match(rest)
        if not m:
            raise ValueError("expected `const NAME DTYPE[COUNT] [DIST]`")
        dtype = self._dtype(m["dtype"])
        dist = _dist(m["dist"]) if m["dist"].strip() else default_dist(dtype)
        if dist.kind == "copy" and not self._param(dist.args[0]).pointer:
            raise ValueError(f"copy({dist.args[0]}): a constant copies a pointer argument's data")
        self.constants.append(ConstantSpec(m["name"], dtype, m["count"].strip(), dist, line))

    def _d_compare(self, line: int, rest: str) -> None:
        usage = "expected `compare NAME where COND`, `compare NAME[i < EXTENT, ...] where COND` or `compare NAME written`"
        head, sep, where = rest.partition(" where ")
        written = not sep and rest.split()[-1:] == ["written"]
        if written:
            head = rest.rsplit(None, 1)[0] if len(rest.split()) > 1 else ""
        elif not sep or not where.strip():
            raise ValueError(usage)
        try:
            tree = ast.parse(head.strip(), mode="eval").body
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise ValueError(usage) from None
        index: tuple[str, ...] = ("i",)
        extents: tuple[str, ...] = ()
        if isinstance(tree, ast.Subscript):
            dims = tree.slice.elts if isinstance(tree.slice, ast.Tuple) else [tree.slice]
            if not all(
                isinstance(d, ast.Compare)
                and isinstance(d.left, ast.Name)
                and len(d.ops) == 1
                and isinstance(d.ops[0], ast.Lt)
                for d in dims
            ):
                raise ValueError("each dimension is `INDEX < EXTENT`, outermost first: `out[i < T, j < T]`")
            index = tuple(cast(ast.Name, cast(ast.Compare, d).left).id for d in dims)
            extents = tuple(ast.unparse(cast(ast.Compare, d).comparators[0]) for d in dims)
            if len(set(index)) != len(index) or not 1 <= len(index) <= 4:
                raise ValueError("give 1 to 4 dimensions with different index names")
            tree = tree.value
        if not isinstance(tree, ast.Name):
            raise ValueError(usage)
        param = self._param(tree.id)
        if not param.pointer:
            raise ValueError(f"`{tree.id}` is a scalar parameter, not an output")
        if any(c.name == tree.id for c in self.compares):
            raise ValueError(f"a second `compare` for `{tree.id}`")
        condition = " ".join(where.replace("&&", " and ").replace("||", " or ").split())
        self.compares.append(CompareSpec(tree.id, index, extents, condition, written, line))

    def _d_define(self, line: int, rest: str) -> None:
        for name, value in _pairs(rest):
            if name in self.defines:
                raise ValueError(f"macro `{name}` given twice")
            self.defines[name] = value
        self.lines["define"] = line

    def _d_template(self, line: int, rest: str) -> None:
        args = tuple(a for a in _split_top(rest.strip().removeprefix("<").removesuffix(">")) if a)
        if len(args) != len(self.kernel.template_params):
            raise ValueError(
                f"{self.kernel.name} has {len(self.kernel.template_params)} template parameter(s), got {len(args)}"
            )
        self.fields["template_args"] = args
        self.lines["template"] = line

    def _d_tolerance(self, line: int, rest: str) -> None:
        values: dict[str, float | None] = {"atol": None, "rtol": None, "norm": None}
        arg = ""
        for key, value in _pairs(rest):
            if key == "arg":
                param = self._param(value)
                if not param.pointer:
                    raise ValueError(f"`{value}` is a scalar parameter, not an output")
                arg = value
                continue
            if key not in values:
                raise ValueError(f"unknown key `{key}` (arg, atol, rtol, norm)")
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"{key}={value} is not a number") from None
            if not math.isfinite(number) or number < 0:
                raise ValueError(f"{key}={value} must be a finite number >= 0")
            values[key] = number
        if all(v is None for v in values.values()):
            raise ValueError("give atol=, rtol= and/or norm=")
        tol = Tolerance(values["atol"], values["rtol"], values["norm"], arg)
        key = f"tolerance {arg}" if arg else "tolerance"
        if key in self.fields:
            raise ValueError(f"a second tolerance for {f'`{arg}`' if arg else 'every output'}")
        self.fields[key] = tol
        self.lines.setdefault("tolerance", line)

    def _d_precision(self, line: int, rest: str) -> None:
        self.fields["allow_precision"] = precision_kinds(rest)
        self.lines["precision"] = line

    def _d_require(self, line: int, rest: str) -> None:
        condition = " ".join(rest.replace("&&", " and ").replace("||", " or ").split())
        if not condition:
            raise ValueError(
                "expected `require CONDITION` (e.g. `n % 32 == 0`, `pow2(block)`, `bytes <= 1<<32`)"
            )
        self.requires.append((condition, line))  # checked for every problem by `problem`

    def _d_work(self, line: int, rest: str) -> None:
        for key, value in _pairs(rest):
            if key not in ("bytes", "flops", "floor"):
                raise ValueError(f"unknown key `{key}` (bytes, flops, floor)")
            if key == "floor" and value.strip() not in ("on", "off"):
                raise ValueError("expected `floor=off` (the work counts overstate the traffic) or `floor=on`")
            self.fields[key] = value.strip() if key == "floor" else value
        self.lines["work"] = line

    def _param(self, name: str) -> Param:
        param = self.kernel.param(name)
        if param is None:
            names = [p.name for p in self.kernel.params]
            close = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean `{close[0]}`?" if close else ""
            raise ValueError(
                f"{self.kernel.name} has no parameter `{name}` (parameters: {', '.join(names)}){hint}"
            )
        return param

    def _misspelt(self, name: str) -> bool:
        """Whether an `arg` line names a parameter that does not exist, ``name`` being the closest
        parameter to it (that line's error then says so, at that line)."""
        names = [p.name for p in self.kernel.params]
        return any(
            difflib.get_close_matches(m, names, n=1) == [name] for m in self.mentioned if m not in names
        )

    def _dtype(self, text: str) -> str:
        text = " ".join(text.split())
        targs = self.fields.get("template_args", ())
        for tp, value in zip(self.kernel.template_params, targs, strict=False):  # type: ignore[call-overload]
            if tp.name == text:
                text = value
        dtype = canonical_dtype(text, self.aliases)
        if dtype is None:
            raise ValueError(f"unknown element type `{text}`")
        return dtype

    def build(self) -> KernelSpec:
        kernel = self.kernel
        first = kernel.comment[0][0] if kernel.comment else kernel.span.start_line
        if not self.sizes:
            self.errors.append(SpecError(first, "no `sizes` line"))
        for key in ("sizes", "verify", "launch", "work"):  # defaults are reported at the block's first line
            self.lines.setdefault(key, first)
        args: list[ArraySpec | ScalarSpec] = []
        for p in kernel.params:
            if p.name in self.args:
                args.append(self.args[p.name])
            elif not p.pointer and p.name in self.sizes:  # `int n` with a size `n`: implied
                dtype = canonical_dtype(p.base_type, self.aliases) or "int32"
                args.append(ScalarSpec(p.name, dtype, p.name, self.lines["sizes"]))
            elif p.name not in self.mentioned and not self._misspelt(p.name):
                self.errors.append(SpecError(first, f"parameter `{p.name}` has no `arg` line"))
        if kernel.template_params and "template_args" not in self.fields:
            self.errors.append(SpecError(first, f"{kernel.name} is a template: add `template ARG, ...`"))
        grid = self.fields.get("grid")
        if grid is None and len(self.sizes) != 1:
            self.errors.append(SpecError(first, "no `launch grid=...` (needed with more than one size)"))
        spec = KernelSpec(
            kernel=kernel.qualified_name,
            sizes=dict(self.sizes),
            verify=tuple(self.verify),
            grid=grid or (f"cdiv({next(iter(self.sizes), 'n')}, block)",),  # type: ignore[arg-type]
            block=self.fields.get("block", ("256",)),  # type: ignore[arg-type]
            smem=str(self.fields.get("smem", "0")),
            args=tuple(args),
            constants=tuple(self.constants),
            template_args=self.fields.get("template_args", ()),  # type: ignore[arg-type]
            tolerance=self.fields.get("tolerance"),  # type: ignore[arg-type]
            output_tolerances=tuple(
                v for k, v in self.fields.items() if k.startswith("tolerance ") and isinstance(v, Tolerance)
            ),
            allow_precision=self.fields.get("allow_precision", ()),  # type: ignore[arg-type]
            bytes=str(self.fields.get("bytes", "")),
            flops=str(self.fields.get("flops", "")),
            floor=self.fields.get("floor", "on") != "off",
            requires=tuple(self.requires),
            compares=tuple(self.compares),
            defines=dict(self.defines),
            lines=dict(self.lines),
        )
        if self.sizes:  # evaluate every expression once per problem size, to report what fails
            for overrides in (None, *spec.verify):
                try:
                    problem(spec, _sizes(spec, overrides))
                except InvalidSpec as exc:
                    self.errors.extend(exc.errors)
                    break
        return spec


def default_dist(dtype: str) -> DistSpec:
    if is_float(dtype):
        return DistSpec("uniform", ("-1", "1"))
    if dtype == "bool":
        return DistSpec("randint", ("0", "2"))
    return DistSpec("randint", ("0", "100"))


def directive_text(comment: str) -> str | None:
    """The directive of a ``//`` comment's text (after ``//``) that starts with ``@cuda-agent``;
    None for other comments, also those that mention ``@cuda-agent`` in prose."""
    text = comment.lstrip("/! \t")
    return text[len(MARKER) :] if text.startswith(MARKER) else None


@dataclass(frozen=True)
class Misplaced:
    """Spec lines that are not directly above a kernel, so no kernel reads them: ``first``..``last``
    (0-based lines), the kernel they were probably meant for (the next one below) and why."""

    first: int
    last: int
    kernel: Kernel | None
    reason: str


def misplaced(doc: Document) -> tuple[Misplaced, ...]:
    """Every block of ``// @cuda-agent`` lines that is not a kernel's spec (separated from the
    kernel by a blank line, a ``#define``, a block comment, ...): silently ignored otherwise."""
    owned = {line for k in doc.kernels for line, _ in k.comment}
    out: list[Misplaced] = []
    line, count = 0, doc.line_count
    while line < count:
        raw = doc.line_bytes(line).decode("utf-8", errors="replace").strip()
        if line in owned or not raw.startswith("//") or directive_text(raw[2:]) is None:
            line += 1
            continue
        first = line
        while line + 1 < count and (line + 1) not in owned:
            nxt = doc.line_bytes(line + 1).decode("utf-8", errors="replace").strip()
            if not nxt.startswith("//"):
                break
            line += 1
        below = [k for k in doc.kernels if k.span.start_line > line]
        target = min(below, key=lambda k: k.span.start_line) if below else None
        if target is None:
            reason = "no kernel follows it"
        else:
            gap = doc.line_bytes(line + 1).decode("utf-8", errors="replace").strip()
            what = "a blank line" if not gap else f"`{gap[:40]}`"
            reason = f"separated from {target.qualified_name} by {what}"
        out.append(Misplaced(first, line, target, reason))
        line += 1
    return tuple(out)


def parse(
    kernel: Kernel, aliases: Mapping[str, str] | None = None
) -> tuple[KernelSpec | None, tuple[SpecError, ...]]:
    """The spec written above ``kernel`` (None when there is no ``@cuda-agent`` line).
    ``aliases``: the file's :attr:`Document.type_aliases`, so parameters typed ``u32`` or ``real`` resolve."""
    lines = [(line, d) for line, text in kernel.comment if (d := directive_text(text)) is not None]
    if not lines:
        return None, ()
    b = _Builder(kernel, aliases or {})
    # template first: element types may name template parameters (`arg x in T[n]`)
    for line, text in sorted(lines, key=lambda lt: not lt[1].strip().startswith("template")):
        b.directive(line, text)
    spec = b.build()
    return spec, tuple(sorted(set(b.errors), key=lambda e: e.line))


# ---------------------------------------------------------------------------------------- resolution

MAX_GRID = (2**31 - 1, 65535, 65535)  # CUDA's grid limits (compute capability >= 3.0)
MAX_SHARED_BYTES = 227 * 1024  # the most dynamic shared memory a block may opt into (sm_80/sm_90)
_VERIFY_DEFAULTS = (97, 1021)  # odd primes: never a multiple of a block size


def _conjuncts(expr: str) -> list[str]:
    """``a and b and c`` -> [a, b, c]."""
    try:
        tree = ast.parse(expr.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return [expr]
    if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And):
        return [ast.unparse(v) for v in tree.values]
    return [expr]


def _names_in(expr: str) -> set[str]:
    try:
        return {n.id for n in ast.walk(ast.parse(expr.strip(), mode="eval")) if isinstance(n, ast.Name)}
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()


def _has_names(expr: str) -> bool:
    try:
        return any(isinstance(n, ast.Name) for n in ast.walk(ast.parse(expr.strip(), mode="eval")))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True


def _sizes(spec: KernelSpec, overrides: Mapping[str, str] | None) -> dict[str, int]:
    env: dict[str, Number] = {}
    for name, expr in spec.sizes.items():
        source = overrides.get(name, expr) if overrides else expr
        key = "verify" if overrides and name in overrides else "sizes"
        try:
            env[name] = _eval_int(source, env, f"size {name}")
        except ValueError as exc:
            raise InvalidSpec((SpecError(spec.lines.get(key, -1), f"size {name}: {exc}"),)) from None
    unknown = set(overrides or ()) - set(spec.sizes)
    if unknown:
        raise InvalidSpec(
            (SpecError(spec.lines.get("verify", -1), f"verify: unknown size {sorted(unknown)[0]}"),)
        )
    return {k: int(v) for k, v in env.items()}


def bench_sizes(spec: KernelSpec) -> dict[str, int]:
    """The benchmark problem's sizes (raises InvalidSpec)."""
    return _sizes(spec, None)


def verify_sizes(spec: KernelSpec) -> tuple[dict[str, int], ...]:
    """The verification problem sizes: the spec's, or by default each literal size capped at 97
    and at 1021 (derived sizes such as ``m=2*n`` follow), lowered to the largest cap that meets
    the spec's ``require`` conditions on sizes (``n % 32 == 0`` -> 96 and 992)."""
    if spec.verify:
        return tuple(_sizes(spec, v) for v in spec.verify)
    bench = _sizes(spec, None)
    out: list[dict[str, int]] = []
    for top in _VERIFY_DEFAULTS:
        sizes = _capped(spec, bench, top)
        if sizes is None or (sizes != bench and not _launch_valid(spec, sizes)):
            sizes = _scaled(spec, bench, top)  # `grid=T/128` is 0 at T=97: T=1024 becomes 128
        if sizes is not None and sizes != bench and sizes not in out:
            out.append(sizes)
    return tuple(out) or (bench,)


def _scaled(spec: KernelSpec, bench: Mapping[str, int], top: int) -> dict[str, int] | None:
    """The program's own sizes halved (each literal size divided by 2, 4, 8, ...) where the launch
    is valid and the ``require`` conditions hold: the smallest that reaches ``top``, else the
    largest below it.  The proportions and the powers of two the launch relies on stay."""
    literal = [k for k, e in spec.sizes.items() if not _has_names(e)]
    largest = max((bench[k] for k in literal), default=0)
    shifts = range(1, largest.bit_length())
    reaching = [k for k in reversed(shifts) if largest >> k >= min(top, largest)]
    below = [k for k in shifts if largest >> k < min(top, largest)]
    for shift in (*reaching, *below):
        sizes = _sizes(spec, {k: str(max(bench[k] >> shift, 1)) for k in literal})
        if _size_requirements_met(spec, sizes) and _launch_valid(spec, sizes):
            return sizes
    return None


def _capped(spec: KernelSpec, bench: Mapping[str, int], top: int) -> dict[str, int] | None:
    """Each literal size capped at the largest value <= ``top`` that meets the spec's ``require``
    conditions on sizes; None when none does."""
    for cap in range(top, 0, -1):
        overrides = {k: str(min(bench[k], cap)) for k, e in spec.sizes.items() if not _has_names(e)}
        sizes = _sizes(spec, overrides)
        if _size_requirements_met(spec, sizes):
            return sizes
    return None


def _launch_valid(spec: KernelSpec, sizes: Mapping[str, int]) -> bool:
    try:
        problem(spec, sizes)
    except InvalidSpec:
        return False
    return True


def _size_requirements_met(spec: KernelSpec, sizes: Mapping[str, int]) -> bool:
    """Whether ``sizes`` meet the ``require`` conditions (each ``and`` part) that name only sizes."""
    for condition in (part for c, _ in spec.requires for part in _conjuncts(c)):
        if _names_in(condition) <= set(sizes) | set(CONSTANTS):
            try:
                if not evaluate(condition, sizes):
                    return False
            except ValueError:
                return False
    return True


def problem(
    spec: KernelSpec,
    sizes: Mapping[str, int],
    block: int | tuple[int, ...] | None = None,
) -> Problem:
    """Resolve ``spec`` at concrete ``sizes``; ``block`` overrides the spec's block size (the
    grid, shared memory and counts that depend on ``block`` follow).  Raises InvalidSpec."""
    env: dict[str, Number] = dict(sizes)
    lines = spec.lines

    def fail(key: str, exc: Exception) -> InvalidSpec:
        return InvalidSpec((SpecError(lines.get(key, -1), f"{key}: {exc}"),))

    try:
        dims = (block,) if isinstance(block, int) else block
        if dims is None:
            dims = tuple(_eval_int(e, env, "block") for e in spec.block)
        bx, by, bz = (*dims, 1, 1, 1)[:3]
        if min(bx, by, bz) < 1 or bx * by * bz > 1024:
            raise ValueError(f"block ({bx}, {by}, {bz}) must have 1..1024 threads")
        env.update(block=bx, block_x=bx, block_y=by, block_z=bz)
        gx, gy, gz = (*(_eval_int(e, env, "grid") for e in spec.grid), 1, 1, 1)[:3]
        if min(gx, gy, gz) < 1:
            raise ValueError(f"grid ({gx}, {gy}, {gz}) must be at least 1 in every dimension")
        if gx > MAX_GRID[0] or gy > MAX_GRID[1] or gz > MAX_GRID[2]:
            raise ValueError(f"grid ({gx}, {gy}, {gz}) is beyond the device's limits {MAX_GRID}")
        smem = _eval_int(spec.smem, env, "smem")
        if not 0 <= smem <= MAX_SHARED_BYTES:
            raise ValueError(f"smem={smem} must be 0..{MAX_SHARED_BYTES} bytes (227 KiB per block)")
    except ValueError as exc:
        raise fail("launch", exc) from None
    args: list[ArgSpec] = []
    moved = 0
    for a in spec.args:
        try:
            if isinstance(a, ScalarSpec):
                value = float(evaluate(a.value, env, finite=not is_float(a.dtype)))
                args.append(ArgSpec(a.name, "scalar", a.dtype, value=value))
                continue
            count = _eval_int(a.count, env, "count")
            if count < 0:
                raise ValueError(f"count {a.count} = {count} is negative")
            offset = _eval_int(a.offset, env, "offset")
            if not 0 <= offset <= count:
                raise ValueError(f"offset={a.offset} = {offset} is outside the array (0..{count})")
            compare = next((c for c in spec.compares if c.name == a.name), None)
            region = None if compare is None else _region(compare, a.role, count, env)
            args.append(
                ArgSpec(a.name, a.role, a.dtype, count, _distribution(a.dist, env), 0.0, offset, region)
            )
            moved += count * dtype_bytes(a.dtype) * (2 if a.role == "inout" else 1)
        except ValueError as exc:
            raise InvalidSpec((SpecError(a.line, f"arg {a.name}: {exc}"),)) from None
    arrays = {a.name: a for a in args if a.role != "scalar"}
    for cmp in spec.compares:
        if cmp.name not in arrays:
            raise InvalidSpec((SpecError(cmp.line, f"compare {cmp.name}: not an array argument"),))
    for a in spec.args:
        if isinstance(a, ArraySpec) and a.dist.kind == "copy":
            src = arrays.get(a.dist.args[0])
            mine = arrays[a.name]
            problem_text = (
                f"copy({a.dist.args[0]}): no array argument of that name"
                if src is None
                else "copy(...) needs an in or inout argument"
                if a.role == "out" or src.role == "out"
                else f"copy({src.name}): {src.dtype}[{src.count}] is not {mine.dtype}[{mine.count}]"
                if (src.dtype, src.count) != (mine.dtype, mine.count)
                else ""
            )
            if problem_text:
                raise InvalidSpec((SpecError(a.line, f"arg {a.name}: {problem_text}"),))
    env["bytes"] = sum(a.count * dtype_bytes(a.dtype) for a in arrays.values())
    for condition, line in spec.requires:
        try:
            met = evaluate(condition, env)
        except ValueError as exc:
            raise InvalidSpec((SpecError(line, f"require: {exc}"),)) from None
        if not met:
            shown = ", ".join(f"{k}={v}" for k, v in env.items() if k in _names_in(condition))
            raise InvalidSpec((SpecError(line, f"require {condition}: not met ({shown})"),))
    constants: list[ConstantInit] = []
    for c in spec.constants:
        try:
            count = _eval_int(c.count, env, "count")
            src = arrays.get(c.dist.args[0]) if c.dist.kind == "copy" else None
            if c.dist.kind == "copy" and (src is None or src.role == "out"):
                raise ValueError(f"copy({c.dist.args[0]}) needs an in or inout array argument")
            if src is not None and (src.dtype, src.count) != (c.dtype, count):
                raise ValueError(f"copy({src.name}): {src.dtype}[{src.count}] is not {c.dtype}[{count}]")
            constants.append(ConstantInit(c.name, c.dtype, count, _distribution(c.dist, env)))
        except ValueError as exc:
            raise InvalidSpec((SpecError(c.line, f"const {c.name}: {exc}"),)) from None
    defines: dict[str, int] = {}
    for macro, text in spec.defines.items():
        try:
            defines[macro] = _eval_int(text, env, f"macro {macro}")
        except ValueError as exc:
            raise fail("define", ValueError(f"macro {macro}: {exc}")) from None
    try:
        bytes_moved = _eval_int(spec.bytes, env, "bytes") if spec.bytes else moved
        flops = _eval_int(spec.flops, env, "flops") if spec.flops else 0
    except ValueError as exc:
        raise fail("work", exc) from None
    return Problem(
        label=", ".join(f"{k}={v}" for k, v in sizes.items()),
        sizes=dict(sizes),
        args=tuple(args),
        launch=Launch((gx, gy, gz), (bx, by, bz), smem),
        constants=tuple(constants),
        bytes_moved=bytes_moved,
        flops=flops,
        defines=defines,
        work_floor=spec.floor,
    )


def problems(spec: KernelSpec, block: int | tuple[int, ...] | None = None) -> tuple[Problem, ...]:
    """Verification problems, then the benchmark problem last (the order of Candidate.launches)."""
    return tuple(problem(spec, s, block) for s in (*verify_sizes(spec), _sizes(spec, None)))


def _substituted(expr: str, env: Mapping[str, Number], bound: tuple[str, ...]) -> str:
    """Element expression ``expr`` with the problem's values in place of its names (``bound``:
    the index names it keeps), checked against the whitelist the worker evaluates."""
    if clash := [b for b in bound if b in env]:
        raise ValueError(f"`{clash[0]}` is a size; name the index otherwise")
    text = _rename(expr, {k: repr(v) for k, v in env.items()})
    if error := expression_error(text, bound):
        raise ValueError(error)
    return text


def _region(c: CompareSpec, role: str, count: int, env: Mapping[str, Number]) -> Region:
    if role == "in":
        raise ValueError(f"compare {c.name}: an input is not compared")
    shape = tuple(_eval_int(e, env, "extent") for e in c.extents) or (count,)
    if math.prod(shape) != count:
        raise ValueError(f"compare {c.name}: shape {shape} does not hold its {count} elements")
    where = "" if c.written else _substituted(c.where, env, c.index)
    return Region(shape, c.index, where, c.written)


def _distribution(d: DistSpec, env: Mapping[str, Number]) -> Distribution:
    if d.kind == "copy":
        return Distribution("copy", source=d.args[0])
    if d.kind == "values":
        return Distribution("values", expr=_substituted(d.args[0], env, ("i",)))
    v = [float(evaluate(a, env)) for a in d.args]
    if d.kind in ("uniform", "randint"):
        if v[0] >= v[1]:
            raise ValueError(f"{d.text()}: low must be below high")
        return Distribution(d.kind, low=v[0], high=v[1])
    if d.kind == "const":
        return Distribution("const", value=v[0])
    return Distribution(d.kind)


# ---------------------------------------------------------------------------------------- rendering

_RENDER_DTYPE = {"float32": "float", "float64": "double", "int32": "int"}


def render(spec: KernelSpec) -> str:
    """The comment block for ``spec`` (what an editor inserts above the kernel), ending in a newline."""
    out = ["sizes " + " ".join(f"{k}={v}" for k, v in spec.sizes.items())]
    if spec.verify and all(v.keys() == spec.verify[0].keys() for v in spec.verify):
        out.append("verify " + " ".join(f"{k}={','.join(v[k] for v in spec.verify)}" for k in spec.verify[0]))
    else:
        out += ["verify " + " ".join(f"{k}={v}" for k, v in ver.items()) for ver in spec.verify]
    launch = f"launch grid={render_dims(spec.grid)} block={render_dims(spec.block)}"
    out.append(launch + (f" smem={spec.smem}" if spec.smem != "0" else ""))
    if spec.template_args:
        out.append("template " + ", ".join(spec.template_args))
    for a in spec.args:
        if isinstance(a, ScalarSpec):
            out.append(f"arg {a.name} = {a.value}")
        else:
            dist = "" if a.role == "out" else " " + a.dist.text()
            offset = f" offset={a.offset}" if a.offset != "0" else ""
            out.append(
                f"arg {a.name} {a.role} {_RENDER_DTYPE.get(a.dtype, a.dtype)}[{a.count}]{dist}{offset}"
            )
    for c in spec.constants:
        out.append(f"const {c.name} {_RENDER_DTYPE.get(c.dtype, c.dtype)}[{c.count}] {c.dist.text()}")
    for tol in (*([spec.tolerance] if spec.tolerance else []), *spec.output_tolerances):
        out.append(f"tolerance {tol.text()}")
    if spec.allow_precision:
        out.append("precision allow=" + ",".join(spec.allow_precision))
    out += [f"require {condition}" for condition, _ in spec.requires]
    out += [f"compare {c.text()}" for c in spec.compares]
    if spec.defines:
        out.append("define " + " ".join(f"{k}={v}" for k, v in spec.defines.items()))
    work = " ".join(f"{k}={v}" for k, v in (("bytes", spec.bytes), ("flops", spec.flops)) if v)
    work += "" if spec.floor else " floor=off"
    if work:
        out.append("work " + work)
    return "".join(f"// {MARKER} {line}\n" for line in out)


def render_inference(inference: Inference) -> str:
    """:func:`render` of an inferred spec with a ``// guess: ...`` line above each directive whose
    value is not certain (what an editor inserts for the user to check)."""
    guesses = inference.guesses()
    out = []
    for line in render(inference.spec).splitlines(keepends=True):
        words = line.split(MARKER, 1)[1].split()
        keys = {
            "sizes": [f for f in guesses if f.startswith("size ")],
            "launch": ["launch", "grid", "block", "smem"],
            "template": ["template"],
        }
        fields = keys.get(words[0], [f"{words[0]} {words[1]}"] if len(words) > 1 else [])
        notes = [f"{f}: {guesses[f]}" if words[0] == "sizes" else guesses[f] for f in fields if f in guesses]
        if notes:
            out.append(f"// guess: {'; '.join(notes)}\n")
        out.append(line)
    return "".join(out)


def render_dims(dims: tuple[str, ...]) -> str:
    """The inverse of :func:`parse_dims`."""
    return dims[0] if len(dims) == 1 else "(" + ", ".join(dims) + ")"


# ---------------------------------------------------------------------------------------- inference

_SIZE_NAMES = re.compile(r"^(n|N|size|len|length|count|num\w*|n_\w+|N_\w+|numel|nelem\w*|total\w*)$")
_CAST = re.compile(
    r"\(\s*(?:const\s+)?(?:unsigned\s+|signed\s+)?(?:int|long|long long|size_t|int64_t|uint64_t|unsigned)\s*\)"
)
_INT_SUFFIX = re.compile(r"\b(\d+)(?:[uU]?[lL]{0,2}|[lL]{1,2}[uU])\b")
_SIZEOF = re.compile(r"sizeof\s*\(\s*([\w\s:]+?)\s*\)")
_HOST_DEF = re.compile(
    r"(?:^|[;{}\s])(?:(?:static\s+)?(?:const(?:expr)?\s+)?(?:unsigned\s+)?(?:int|long|long long|size_t|auto|int64_t|uint64_t|int32_t|unsigned)\s+)"
    r"(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>(?:\([^;{}]*\)|[^;,{}()])+);",
    re.M,
)
_CDIV_MACROS = frozenset({"CEIL_DIV", "CEILDIV", "DIV_UP", "DIVUP", "div_up", "ceil_div", "iDivUp", "cdiv"})
_DEFINE = re.compile(r"^\s*#\s*define\s+(?P<name>[A-Za-z_]\w*)\s+(?P<value>[^\n]+?)\s*$", re.M)
_DIM3 = re.compile(r"\bdim3\s+(?P<name>[A-Za-z_]\w*)\s*(?:\(|=\s*dim3\s*\(|\{)(?P<value>[^;]*?)[)}]\s*;")


def infer(doc: Document, kernel: Kernel) -> Inference:
    """Propose a spec from the signature and, when the program launches the kernel, from running
    the host code to that launch (:mod:`agent.host`), else from the launch site's text.  Says how
    sure it is, and why (each reason with its evidence, file:line).  An output whose stores are
    guarded by more than upper bounds (``j <= i``, ``i < 1``) gets ``compare NAME written``."""
    inference = _infer_spec(doc, kernel)
    spec = inference.spec
    outputs = [a.name for a in spec.args if isinstance(a, ArraySpec) and a.role == "out"]
    compares, evidence = [], []
    for name, (line, guard) in partial_stores(doc, kernel, outputs).items():
        compares.append(CompareSpec(name, written=True))
        where = f"{Path(doc.path).name if doc.path else 'file'}:{line + 1}"
        note = f"stored only where `{guard}`: elements it skips are not compared"
        evidence.append(Evidence(f"compare {name}", where, "medium", note))
    if not compares:
        return inference
    return replace(
        inference,
        spec=replace(spec, compares=tuple(compares)),
        reasons=(*inference.reasons, *(e.note for e in evidence)),
        evidence=(*inference.evidence, *evidence),
    )


_ORDER = frozenset({"<", "<=", ">", ">="})


def partial_stores(doc: Document, kernel: Kernel, outputs: Sequence[str]) -> dict[str, tuple[int, str]]:
    """Outputs whose stores are all guarded by a comparison that is not an upper bound against a
    parameter: two local indices (``j <= i``, a triangle) or a local against a positive literal
    (``i < 1``, a boundary).  Name -> (0-based line of a store, the guard's text)."""
    body = _body_node(doc, kernel)
    if body is None:
        return {}
    params = {p.name for p in kernel.params}
    found: dict[str, tuple[int, str]] = {}
    unguarded: set[str] = set()
    for n in _walk(body):
        left = n.child_by_field_name("left") if n.type == "assignment_expression" else None
        target = (
            left.child_by_field_name("argument") if left and left.type == "subscript_expression" else None
        )
        name = doc.node_text(target) if target is not None else ""
        if name not in outputs:
            continue
        guard = next((g for c in _guards(n) for g in _partial_comparisons(doc, c, params)), None)
        if guard is None:
            unguarded.add(name)
        else:
            found.setdefault(name, (n.start_point[0], guard))
    return {k: v for k, v in found.items() if k not in unguarded}


def _guards(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    """The conditions a statement runs under: enclosing ``if``s it is the consequence of, and
    ``if (...) return;`` statements before it in enclosing blocks."""
    child, up = node, node.parent
    while up is not None:
        if up.type == "if_statement" and up.child_by_field_name("consequence") == child:
            cond = up.child_by_field_name("condition")
            if cond is not None:
                yield cond
        if up.type == "compound_statement":
            for stmt in up.named_children:
                if stmt == child:
                    break
                then = stmt.child_by_field_name("consequence") if stmt.type == "if_statement" else None
                if then is not None and "return_statement" in (
                    then.type,
                    *(c.type for c in then.named_children),
                ):
                    cond = stmt.child_by_field_name("condition")
                    if cond is not None:
                        yield cond
        child, up = up, up.parent


def _partial_comparisons(doc: Document, cond: tree_sitter.Node, params: set[str]) -> Iterator[str]:
    def local(n: tree_sitter.Node | None) -> bool:
        return n is not None and n.type == "identifier" and doc.node_text(n) not in params

    def positive(n: tree_sitter.Node | None) -> bool:
        text = doc.node_text(n) if n is not None and n.type == "number_literal" else ""
        return text.isdigit() and int(text) > 0

    for n in _walk(cond):
        op = n.child_by_field_name("operator") if n.type == "binary_expression" else None
        if op is None or doc.node_text(op) not in _ORDER:
            continue
        a, b = n.child_by_field_name("left"), n.child_by_field_name("right")
        if (local(a) and local(b)) or (local(a) and positive(b)) or (positive(a) and local(b)):
            yield doc.node_text(n)


def _infer_spec(doc: Document, kernel: Kernel) -> Inference:
    found = host.launch_of(doc, kernel.name)
    if found is not None:
        from_run = _infer_from_run(doc, kernel, *found)
        if from_run is not None:
            return from_run
    reasons: list[str] = []
    evidence: list[Evidence] = []
    site = next(iter(doc.launches_of(kernel.name)), None)
    at = (
        f"{Path(doc.path).name if doc.path else 'file'}:{site.span.start_line + 1}"
        if site is not None
        else ""
    )
    # names defined in the launching function win over same-named ones elsewhere in the file
    caller = doc.text_in(site.caller_span) if site is not None and site.caller_span is not None else ""
    defs = {**_host_definitions(doc.text), **_host_definitions(caller)}
    aliases = doc.type_aliases
    ints = [
        p
        for p in kernel.params
        if not p.pointer and (canonical_dtype(p.base_type, aliases) or "").startswith(("int", "uint"))
    ]
    host_args = {p.name: a.text for p, a in zip(kernel.params, site.args, strict=False)} if site else {}
    # an integer is a size when the launch gives its value or, without one, when its name says so
    known = [p for p in ints if _host_value(host_args.get(p.name, ""), defs) is not None]
    sizes = known or [p for p in ints if _SIZE_NAMES.match(p.name)] or ints
    # host expression text -> kernel size name, from the launch site's arguments
    names: dict[str, str] = {}
    if site is not None:
        reasons.append(f"launch site at line {site.span.start_line + 1}")
        for p, a in zip(kernel.params, site.args, strict=False):
            if p in sizes and re.fullmatch(r"[A-Za-z_]\w*", a.text):
                names[a.text] = p.name
    else:
        reasons.append("no launch site in this file: roles and sizes come from the signature only")
    default_size = {1: "1<<24", 2: "4096"}.get(len(sizes), "512")
    size_exprs: dict[str, str] = {}
    for p in sizes:
        value = _host_value(host_args.get(p.name, ""), defs)
        size_exprs[p.name] = value or default_size
        if value is None:
            reasons.append(f"benchmark value of {p.name} guessed as {default_size}")
            evidence.append(
                Evidence(f"size {p.name}", "", "low", f"benchmark value guessed as {default_size}")
            )
    if not size_exprs:
        size_exprs = {"n": "1<<20"}
        reasons.append("no integer size parameter: invented n=1<<20")
    env: dict[str, Number] = {k: 97 for k in size_exprs}
    fallback_count = "*".join(size_exprs)
    args: list[ArraySpec | ScalarSpec] = []
    sure = site is not None
    unknown_types = False  # a struct or unknown type: the proposal is a guess
    template_args = tuple(_host_value(a, defs) or a for a in site.template_args) if site is not None else ()
    tmap = {tp.name: v for tp, v in zip(kernel.template_params, template_args, strict=False)}
    for p in kernel.params:
        dtype = canonical_dtype(tmap.get(p.base_type, p.base_type), aliases)
        if not p.pointer:
            given = _host_value(host_args.get(p.name, ""), defs)
            value = (
                p.name
                if p.name in size_exprs
                else given
                if given is not None
                else ("1.5" if dtype and is_float(dtype) else "1")
            )
            if dtype is None:
                reasons.append(f"type of scalar {p.name} (`{p.base_type}`) unknown: assumed int")
                unknown_types = True
            args.append(ScalarSpec(p.name, dtype or "int32", value))
            if given is not None and p.name not in size_exprs:
                reasons.append(f"scalar {p.name} = {value} at the launch site")
                evidence.append(Evidence(f"arg {p.name}", at, "medium", "read from the launch site's text"))
            elif p.name not in size_exprs:
                reasons.append(f"scalar {p.name} set to {value}")
                evidence.append(Evidence(f"arg {p.name}", "", "low", f"value {value} guessed"))
            continue
        if dtype is None:
            reasons.append(f"element type of {p.name} (`{p.base_type}`) unknown: assumed float")
            dtype, sure, unknown_types = "float32", False, True
        role = roles(doc, kernel).get(p.name, "inout")
        count = _allocation_count(doc.text, host_args.get(p.name, ""), names, defs, env)
        if count is None:
            count, sure = fallback_count, False
            reasons.append(f"count of {p.name} assumed {count}")
            evidence.append(Evidence(f"arg {p.name}", "", "low", f"count {count} assumed"))
        else:
            reasons.append(f"count of {p.name} = {count} from its allocation")
        dist = default_dist(dtype)
        if role == "in" and dist.kind == "randint" and dtype != "bool":  # maybe indices: keep them in range
            dist = DistSpec("randint", ("0", next(iter(size_exprs))))
        args.append(ArraySpec(p.name, role, dtype, count, dist))
    grid: tuple[str, ...] = (f"cdiv({next(iter(size_exprs))}, block)",)
    block: tuple[str, ...] = ("256",)
    if site is not None and site.block is not None and site.grid is not None:
        launch = _launch_from_site(site.grid.text, site.block.text, names, defs, env)
        if launch is not None:
            grid, block = launch
            reasons.append("grid and block from the launch site")
            evidence.append(Evidence("launch", at, "high"))
        else:
            sure = False
            reasons.append("could not read grid/block from the launch site: assumed cdiv(n, 256) x 256")
            evidence.append(Evidence("launch", "", "low", "grid and block not readable at the launch site"))
    smem = "0"
    if site is not None and site.shared is not None:
        smem = _translate(site.shared.text, names, defs) or "0"
    if kernel.template_params and not template_args:
        template_args = tuple(
            "float" if tp.kind == "type" else (tp.default or "256") for tp in kernel.template_params
        )
        sure = False
        reasons.append(f"template arguments guessed: {', '.join(template_args)}")
        evidence.append(Evidence("template", "", "low", "template arguments guessed"))
    spec = KernelSpec(
        kernel=kernel.qualified_name,
        sizes=size_exprs,
        grid=grid,
        block=block,
        smem=smem,
        args=tuple(args),
        template_args=template_args,
    )
    try:
        problems(spec)
    except InvalidSpec as exc:
        spec = replace(spec, grid=(f"cdiv({next(iter(size_exprs))}, block)",), block=("256",), smem="0")
        sure = False
        reasons.append(f"fell back to a default launch ({exc})")
        evidence.append(Evidence("launch", "", "low", "default launch"))
    confidence: Confidence = (
        "low"
        if unknown_types
        else "high"
        if sure
        else "medium"
        if site is not None or len(sizes) == 1
        else "low"
    )
    if site is None:
        evidence.append(Evidence("launch", "", "low", "no launch found: default launch"))
    return Inference(spec, confidence, tuple(reasons), tuple(evidence))


def spec_for(doc: Document, kernel: Kernel) -> SpecResult:
    """The written spec if there is one (with its errors), else an inferred one."""
    spec, errors = parse(kernel, doc.type_aliases)
    if spec is not None:
        return SpecResult(kernel.qualified_name, "parsed", spec, errors)
    inference = infer(doc, kernel)
    return SpecResult(kernel.qualified_name, "inferred", inference.spec, (), inference)


def _host_definitions(text: str) -> dict[str, str]:
    """Host-side names with a simple initialiser: ``int N = 1 << 20;``, ``#define N 4096``, ``dim3 b(16, 16);``."""
    defs: dict[str, str] = {}
    for pattern in (_DEFINE, _HOST_DEF):
        for m in pattern.finditer(text):
            defs.setdefault(m["name"], m["value"].strip())
    for m in _DIM3.finditer(text):
        defs.setdefault(m["name"], f"dim3({m['value'].strip()})")
    return defs


def _translate(text: str, names: Mapping[str, str], defs: Mapping[str, str], depth: int = 0) -> str:
    """A host C expression as a spec expression over the kernel's sizes, expanding host names."""
    t = _CAST.sub("", text)
    t = _INT_SUFFIX.sub(r"\1", t)
    t = _SIZEOF.sub(lambda m: str(dtype_bytes(canonical_dtype(m[1]) or "float32")), t)

    def sub(m: re.Match[str]) -> str:
        word = m[0]
        if word in _CDIV_MACROS:
            return "cdiv"
        if word in names:
            return names[word]
        if word in defs and depth < 6 and word not in _FUNCS:
            inner = _translate(defs[word], names, defs, depth + 1)
            return inner if re.fullmatch(r"[\w.]+|\(.*\)", inner) and _balanced(inner) else f"({inner})"
        return word

    return re.sub(r"[A-Za-z_]\w*", sub, t).strip()


def _host_value(arg: str, defs: Mapping[str, str]) -> str | None:
    """The literal value a launch argument stands for, as written (``1 << 24``), if it has one."""
    if not arg:
        return None
    literal = host.number_literal(arg.strip())
    if literal is not None:  # `0.5f`, `1e-3f`: a number as C writes it
        return literal.expr
    text = defs.get(arg, arg) if re.fullmatch(r"[A-Za-z_]\w*", arg) else arg
    expr = _translate(text, {}, defs)
    try:
        value = evaluate(expr, {})
    except ValueError:
        return None
    return text if text == expr else str(value) if isinstance(value, int) else None


def _allocation_count(
    text: str, arg: str, names: Mapping[str, str], defs: Mapping[str, str], env: Mapping[str, Number]
) -> str | None:
    """Element count of the host buffer behind a launch argument, from cudaMalloc/new/vector."""
    if not re.fullmatch(r"[A-Za-z_]\w*", arg):
        return None
    a = re.escape(arg)
    patterns = (
        rf"cudaMalloc(?:Managed|Async)?\s*\(\s*(?:\(\s*\w+\s*\*\*\s*\)\s*)?&\s*{a}\s*,\s*(?P<bytes>[^;]+?)\s*(?:,[^,;]*)?\)\s*;",
        rf"\b{a}\s*=\s*new\s+[\w:]+\s*\[(?P<count>[^\]]+)\]",
        rf"std::vector\s*<[^>]+>\s*{a}\s*[({{](?P<count>[^,;)}}]+)",
    )
    for i, pattern in enumerate(patterns):
        m = re.search(pattern, text)
        if not m:
            continue
        if i == 0:
            raw = m["bytes"].strip()
            raw = defs.get(raw, raw)  # `cudaMalloc(&d_a, bytes)` with `size_t bytes = n * sizeof(float);`
            stripped = re.sub(r"\s*\*\s*sizeof\s*\([^)]*\)|sizeof\s*\([^)]*\)\s*\*\s*", "", raw, count=1)
            count = _translate(stripped, names, defs) if stripped != raw else None
        else:
            count = _translate(m["count"], names, defs)
        if count is not None:
            try:
                evaluate(count, env)
            except ValueError:
                continue
            return count
    return None


def _launch_from_site(
    grid: str, block: str, names: Mapping[str, str], defs: Mapping[str, str], env: Mapping[str, Number]
) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    block_dims = _dim3(_translate(block, names, defs))
    if block_dims is None:
        return None
    grid = grid.strip()
    if grid in defs:
        grid = defs[grid]
    hidden = dict(defs)
    if re.fullmatch(r"[A-Za-z_]\w*", block.strip()):  # the block's host name: `threads`, `block.x`
        name = block.strip()
        hidden.pop(name, None)
        grid = re.sub(rf"\b{name}\s*\.\s*([xyz])\b", r"block_\1", grid)
        if len(block_dims) == 1:
            grid = re.sub(rf"\b{name}\b", "block", grid)
    grid_dims = _dim3(_translate(grid, names, hidden))
    if grid_dims is None:
        return None
    if len(block_dims) == 1:
        literal = block_dims[0]
        if literal.isdigit():  # `(n + 255) / 256` -> `(n + (block - 1)) / block`
            minus_one = str(int(literal) - 1)
            grid_dims = tuple(
                re.sub(
                    rf"(?<![\w.])({re.escape(literal)}|{minus_one})(?![\w.])",
                    lambda m: "block" if m[1] == literal else "(block - 1)",
                    g,
                )
                for g in grid_dims
            )
    trial = {**env, "block": 32, "block_x": 32, "block_y": 1, "block_z": 1}
    try:
        for e in (*block_dims, *grid_dims):
            evaluate(e, trial)
    except ValueError:
        return None
    return grid_dims, block_dims


def _dim3(text: str) -> tuple[str, ...] | None:
    t = text.strip()
    while t.startswith("(") and t.endswith(")") and len(_split_top(t[1:-1])) == 1 and _balanced(t[1:-1]):
        t = t[1:-1].strip()
    m = re.fullmatch(r"dim3\s*[({](.*)[)}]", t, re.S)
    if m:
        dims = tuple(d for d in _split_top(m[1]) if d)
        return dims if 1 <= len(dims) <= 3 else None
    return (t,) if t else None


def _balanced(t: str) -> bool:
    depth = 0
    for ch in t:
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return False
    return depth == 0


# ---------------------------------------------------------------------------------------- partial directives


def launch_pairs(text: str) -> dict[str, str]:
    """The keys of a ``launch`` directive's text (``grid=... block=... smem=...``, any subset), each
    dimension list checked; raises ValueError with the reason.  For launch changes written
    outside a full spec (a candidate's own ``launch`` line, ``cuda-agent compare --launch``)."""
    out: dict[str, str] = {}
    for key, value in _pairs(text):
        if key not in ("grid", "block", "smem"):
            raise ValueError(f"unknown key `{key}` (grid, block, smem)")
        if key in out:
            raise ValueError(f"`{key}` given twice")
        if key != "smem":
            parse_dims(value)
        out[key] = value
    return out


def precision_kinds(text: str) -> tuple[str, ...]:
    """The kinds of a ``precision`` directive's text (``allow=fp16,bf16``), each one of
    :data:`~sandbox.contract.PRECISIONS`; raises ValueError with the reason.  Also a candidate's
    own ``precision`` line (``cuda-agent compare``): the lower precision it claims to use."""
    kinds: list[str] = []
    for key, value in _pairs(text):
        if key != "allow":
            raise ValueError(f"unknown key `{key}` (allow)")
        for kind in (k.strip() for k in value.split(",")):
            if kind not in PRECISIONS:
                raise ValueError(f"unknown precision `{kind}` ({', '.join(PRECISIONS)})")
            kinds.append(kind)
    if not kinds:
        raise ValueError("expected `precision allow=KIND[,KIND...]`")
    return tuple(dict.fromkeys(kinds))


def template_names(args: tuple[str, ...]) -> frozenset[str]:
    """The names template arguments mention (``matmul_tri_naive`` in ``k<matmul_tri_naive>``):
    what a standalone unit must define besides the kernel's own references."""
    return frozenset(re.findall(r"[A-Za-z_]\w*", " ".join(args)))


def split_args(text: str) -> list[str]:
    """Template arguments ``float, 256`` (or ``<float, 256>``) split at top-level commas."""
    return _split_top(text.strip().removeprefix("<").removesuffix(">"))


# ---------------------------------------------------------------------------------------- inference from a run


def _infer_from_run(
    doc: Document, kernel: Kernel, event: host.LaunchEvent, run: host.HostRun, host_doc: Document
) -> Inference | None:
    """The spec of ``kernel`` from the values its launch had when the program ran to it."""
    aliases = {**host_doc.type_aliases, **doc.type_aliases}
    if len(event.args) != len(kernel.params):
        return None
    tmap = {tp.name: v for tp, v in zip(kernel.template_params, event.template_args, strict=False)}
    body_names = _body_identifiers(doc, kernel)
    values = run.env()
    reasons = [f"launch at {event.where}" + (f", taking {', '.join(event.notes)}" if event.notes else "")]
    guesses: list[str] = []
    evidence: list[Evidence] = []
    args: list[tuple[Param, str, host.Value]] = []  # (param, dtype, value)
    for p, v in zip(kernel.params, event.args, strict=True):
        dtype = canonical_dtype(tmap.get(p.base_type, p.base_type), aliases)
        if dtype is None:  # a struct or an unknown type: this argument is a guess, the rest stands
            dtype = "float32" if p.pointer else "int32"
            guesses.append(f"type of {p.name}")
            evidence.append(
                Evidence(f"arg {p.name}", "", "low", f"type `{p.base_type}` unknown: {dtype} assumed")
            )
        args.append((p, dtype, v))
    access = roles(doc, kernel)
    specs: list[ArraySpec | ScalarSpec] = []
    data_exprs: list[str] = []
    counts: dict[str, str] = {}
    for p, dtype, v in args:
        if p.pointer:
            if isinstance(v, host.Buffer):
                count = (
                    v.count
                    if v.elem == dtype_bytes(dtype)
                    else f"{_paren(v.count)}*{v.elem}/{dtype_bytes(dtype)}"
                )
                if v.offset != "0":
                    count = f"{_paren(count)} - {_paren(v.offset)}"
                reasons.append(f"count of {p.name} from its allocation at {v.where}")
                evidence.append(Evidence(f"arg {p.name}", v.where, "high"))
            else:
                count = ""
            counts[p.name] = count
            if count:
                data_exprs.append(count)
        elif isinstance(v, host.Num) and not is_float(dtype):
            data_exprs.append(v.expr)
    # a macro or file-scope constant the kernel uses is compiled in: never a size, never the block
    frozen = {n for n, r in run.roots.items() if r.symbol and r.symbol in body_names}
    block_dims = (
        event.block.dims
        if isinstance(event.block, host.Dims)
        else (event.block,)
        if isinstance(event.block, host.Num)
        else ()
    )
    subst: dict[str, str] = {}  # the roots the block is made of follow the block (search, verify)
    axes = ("",) if len(block_dims) == 1 else ("_x", "_y", "_z")
    for axis, d in zip(axes, block_dims, strict=False):
        if d is not None and d.expr in run.roots and d.expr not in frozen:
            subst[d.expr] = f"block{axis}"
    sizes = [
        n
        for n in run.roots
        if n not in frozen and n not in subst and any(n in host.names(e) for e in data_exprs)
    ]
    literal = {n: str(values[n]) for n in run.roots if n not in sizes and n not in subst and n in values}
    # a size passed as is to a parameter of the same name but for case takes its name (`ROWS` -> `rows`)
    taken = set(run.roots)
    for p, _dtype, v in args:
        if (
            isinstance(v, host.Num)
            and v.expr in sizes
            and v.expr.lower() == p.name.lower()
            and v.expr not in literal
            and p.name not in taken
        ):
            literal[v.expr] = p.name
            taken.add(p.name)
    names = {n: literal.get(n, n) for n in sizes}
    # without sizes from the program (a launcher nobody calls with values), each integer argument
    # it leaves unknown is a size of its own name at a guessed benchmark value, said to be a guess
    unknown = [] if sizes else [p.name for p, d, v in args if not p.pointer and not is_float(d) and v is None]
    guessed_sizes = dict.fromkeys(unknown, {1: "1<<24", 2: "4096"}.get(len(unknown), "512"))
    values.update({n: evaluate(e, {}) for n, e in guessed_sizes.items()})
    size_names = [*names.values(), *guessed_sizes]

    def spec_expr(e: str, keep_block: bool = True) -> str:
        return _rename(
            e,
            {
                **literal,
                **(subst if keep_block else {k: literal.get(k, str(values.get(k, 0))) for k in subst}),
            },
        )

    # each launch field falls back on its own: an unreadable grid keeps the block it was read with
    how: Confidence = "medium" if event.notes else "high"
    note = "; ".join(event.notes)
    try:
        if not block_dims or any(d is None for d in block_dims):
            raise ValueError("block not readable")
        block = tuple(str(evaluate(spec_expr(d.expr, False), values)) for d in block_dims if d is not None)
        evidence.append(Evidence("block", event.where, how, note))
    except ValueError:
        block = ("256",)
        guesses.append("block")
        evidence.append(Evidence("block", "", "low", "block not readable at the launch: 256 assumed"))
    grid_dims = (
        event.grid.dims
        if isinstance(event.grid, host.Dims)
        else (event.grid,)
        if isinstance(event.grid, host.Num)
        else ()
    )
    first = next(iter(size_names), "")
    if grid_dims and all(g is not None for g in grid_dims):
        grid = tuple(spec_expr(g.expr) for g in grid_dims if g is not None)
        evidence.append(Evidence("grid", event.where, how, note))
    else:
        grid = (f"cdiv({first}, {'block' if len(block) == 1 else 'block_x'})",) if first else ("1",)
        guesses.append("grid")
        evidence.append(Evidence("grid", "", "low", f"grid unknown at the launch: {grid[0]} assumed"))
    if isinstance(event.smem, host.Num):
        smem = spec_expr(event.smem.expr)
        evidence.append(Evidence("smem", event.where, how, note))
    else:  # one element per thread of the kernel's `extern __shared__ T buf[]`, if it has one
        smem = _smem_guess(doc, kernel, aliases, axes)
        guesses.append("smem")
        evidence.append(Evidence("smem", "", "low", f"dynamic shared memory not readable: {smem} assumed"))
    if event.template_args:
        evidence.append(Evidence("template", event.where, "high"))
    fallback = "*".join(size_names) or "1"
    for p, dtype, v in args:
        if p.pointer:
            count = spec_expr(counts[p.name]) if counts[p.name] else fallback
            if not counts[p.name]:
                guesses.append(f"count of {p.name}")
                evidence.append(Evidence(f"arg {p.name}", "", "low", f"count {count} assumed"))
            role = access.get(p.name, "inout")
            dist = default_dist(dtype)
            if isinstance(v, host.Buffer) and v.fill:
                dist = DistSpec("const", (v.fill,))
            specs.append(ArraySpec(p.name, role, dtype, count, dist))
        elif isinstance(v, host.Num):
            specs.append(ScalarSpec(p.name, dtype, spec_expr(v.expr) if not is_float(dtype) else v.expr))
            evidence.append(Evidence(f"arg {p.name}", event.where, "high"))
        elif p.name in guessed_sizes:
            specs.append(ScalarSpec(p.name, dtype, p.name))
            guesses.append(f"size {p.name}")
            note = f"benchmark value guessed as {guessed_sizes[p.name]}: the host code does not give it"
            evidence.append(Evidence(f"size {p.name}", "", "low", note))
        else:
            value = "1.5" if is_float(dtype) else "1"
            guesses.append(f"value of {p.name}")
            evidence.append(Evidence(f"arg {p.name}", "", "low", f"value {value} guessed"))
            specs.append(ScalarSpec(p.name, dtype, value))
    specs = _index_ranges(doc, kernel, specs)
    constants = []
    for name, (ctype, csize) in run.constants.items():
        if name not in body_names:
            continue
        cdtype = (
            canonical_dtype(
                ctype.replace("__constant__", "").replace("__device__", "").replace("static", ""), aliases
            )
            or "float32"
        )
        copy = run.copies.get(name)
        count = ""
        if copy is not None and copy.bytes is not None and copy.bytes.sized is not None:
            count = str(evaluate(spec_expr(copy.bytes.sized[0]), {**values, "block": 1}))
            reasons.append(f"const {name} filled at {copy.where}")
            evidence.append(Evidence(f"const {name}", copy.where, "high"))
        else:
            guesses.append(f"const {name}")
            evidence.append(
                Evidence(f"const {name}", "", "low", "no cudaMemcpyToSymbol seen: count from the declaration")
            )
            count = csize or "1"
        constants.append(ConstantSpec(name, cdtype, count, default_dist(cdtype)))
    requires: list[tuple[str, int]] = []
    allowed = set(names.values()) | {"block", "block_x", "block_y", "block_z"} | set(CONSTANTS)
    for condition, where in run.requires.items():
        translated = spec_expr(condition)
        used = _names_in(translated)
        if used and used <= allowed:
            requires.append((translated, -1))
            reasons.append(f"require {translated} from {where}")
            evidence.append(Evidence(f"require {translated}", where, "high"))
    if "grid" not in guesses:  # `grid=T/128` launches T/128 blocks: the program assumes T % 128 == 0
        for condition in _exact_divisions(grid, set(size_names)):
            requires.append((condition, -1))
            evidence.append(
                Evidence(f"require {condition}", event.where, "medium", "the grid divides exactly")
            )
    spec = KernelSpec(
        kernel=kernel.qualified_name,
        requires=tuple(requires),
        sizes={**{names[n]: run.roots[n].value for n in sizes}, **guessed_sizes} or {"n": "1"},
        grid=grid,
        block=block,
        smem=smem,
        args=tuple(specs),
        constants=tuple(constants),
        template_args=event.template_args,
        defines={name: spec_expr(value.expr) for name, value in event.defines if name in body_names},
    )
    try:
        problems(spec)
    except InvalidSpec as exc:
        if not any(e.message.startswith("launch") for e in exc.errors):
            return None
        # the launch as read does not resolve (a grid beyond the device's limits, too much shared
        # memory): the launch fields fall back, the fewest first, each said to be a guess
        default_grid = (f"cdiv({first}, {'block' if len(block) == 1 else 'block_x'})",) if first else ("1",)
        default_smem = _smem_guess(doc, kernel, aliases, axes)
        shown = {"grid": render_dims(default_grid), "smem": default_smem}
        why = exc.errors[0].message
        for fields in (("smem",), ("grid",), ("grid", "smem")):
            trial = replace(
                spec,
                grid=default_grid if "grid" in fields else spec.grid,
                smem=default_smem if "smem" in fields else spec.smem,
            )
            try:
                problems(trial)
            except InvalidSpec:
                continue
            spec = trial
            guesses += list(fields)
            evidence = [e for e in evidence if e.field not in fields]
            evidence += [
                Evidence(f, "", "low", f"not valid as read ({why}): {shown[f]} assumed") for f in fields
            ]
            break
        else:
            return None
    for n in sizes:
        reasons.append(f"size {names[n]}={run.roots[n].value} from {run.roots[n].where}")
        evidence.append(Evidence(f"size {names[n]}", run.roots[n].where, "high"))
    reasons += [f"guessed: {g}" for g in guesses]
    confidence: Confidence = "low" if guesses else "medium" if event.notes else "high"
    return Inference(spec, confidence, tuple(reasons), tuple(evidence))


def _paren(e: str) -> str:
    return e if re.fullmatch(r"[\w.]+", e) else f"({e})"


def _rename(expr: str, mapping: Mapping[str, str]) -> str:
    """``expr`` with names replaced (each by a name or a number), re-printed."""
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return expr

    class _T(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in mapping:
                return ast.parse(mapping[node.id], mode="eval").body
            return node

    return ast.unparse(_T().visit(tree))


def _body_identifiers(doc: Document, kernel: Kernel) -> set[str]:
    node = _body_node(doc, kernel)
    if node is None:
        return set()
    return {doc.node_text(n) for n in _walk(node) if n.type == "identifier"}


def _body_node(doc: Document, kernel: Kernel) -> tree_sitter.Node | None:
    if kernel.body_span is None:
        return None
    return doc.tree.root_node.descendant_for_byte_range(
        kernel.body_span.start_byte, kernel.body_span.end_byte
    )


def _exact_divisions(grid: tuple[str, ...], sizes: set[str]) -> list[str]:
    """``A % B == 0`` for each grid dimension written ``A / B`` with ``A`` a product of sizes and
    ``B`` free of them (``T / 128``, ``B*T / block``; never the ceiling idiom ``(n + 127) / 128``)."""
    out: list[str] = []
    for dim in grid:
        try:
            tree = ast.parse(dim, mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            continue
        if not (isinstance(tree, ast.BinOp) and isinstance(tree.op, ast.Div | ast.FloorDiv)):
            continue
        left, right = tree.left, tree.right
        products = all(
            isinstance(n, ast.Name | ast.Constant | ast.Load | ast.Mult)
            or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult))
            for n in ast.walk(left)
        )
        left_names = {n.id for n in ast.walk(left) if isinstance(n, ast.Name)}
        right_names = {n.id for n in ast.walk(right) if isinstance(n, ast.Name)}
        if products and left_names and left_names <= sizes and not right_names & sizes:
            out.append(f"{_paren(ast.unparse(left))} % {_paren(ast.unparse(right))} == 0")
    return out


def _smem_guess(doc: Document, kernel: Kernel, aliases: Mapping[str, str], axes: tuple[str, ...]) -> str:
    """Dynamic shared memory when the launch does not say: one element per thread of the kernel's
    ``extern __shared__`` array (``block*4``), else none."""
    element = _dynamic_shared_type(doc, kernel, aliases)
    return f"{'*'.join(f'block{a}' for a in axes)}*{dtype_bytes(element)}" if element else "0"


def _dynamic_shared_type(doc: Document, kernel: Kernel, aliases: Mapping[str, str]) -> str | None:
    """The element type of the kernel's ``extern __shared__ T buf[]``; None without one."""
    body = _body_node(doc, kernel)
    for n in _walk(body) if body is not None else ():
        if n.type == "declaration" and {"extern", "__shared__"} <= {doc.node_text(c) for c in n.children}:
            type_node = n.child_by_field_name("type")
            return canonical_dtype(doc.node_text(type_node), aliases) if type_node is not None else None
    return None


def _walk(node: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(n.children))


_STORES = re.compile(r"^__st(cs|cg|wb|wt|_\w+)?$")
_LOADS = re.compile(r"^__ld(g|cs|cg|ca|lu|cv)$")


def roles(doc: Document, kernel: Kernel) -> dict[str, ArrayRole]:
    """Each pointer parameter's role from what the body does with it (comments never count): ``in``
    when only read (or ``const``), ``out`` when its first access in evaluation order is a plain
    store, ``inout`` otherwise.  Local pointers derived from a parameter (``float* row = out + i``)
    count as the parameter; a pointer handed to an unknown function is read and written."""
    body = _body_node(doc, kernel)
    params = {p.name: p for p in kernel.params if p.pointer}
    out: dict[str, ArrayRole] = {n: ("in" if p.const else "inout") for n, p in params.items()}
    if body is None:
        return out
    alias: dict[str, str] = {n: n for n in params}
    events: dict[str, list[tuple[int, str]]] = {n: [] for n in params}
    for n in _walk(body):
        if n.type == "init_declarator":
            target = n.child_by_field_name("declarator")
            value = n.child_by_field_name("value")
            base = _base_pointer(doc, value, alias) if value is not None else None
            if base is not None and target is not None and target.type == "pointer_declarator":
                inner = target.child_by_field_name("declarator")
                if inner is not None:
                    alias[doc.node_text(inner)] = base
            continue
        if n.type != "identifier" or doc.node_text(n) not in alias:
            continue
        if n.parent is not None and n.parent.type in (
            "pointer_declarator",
            "init_declarator",
            "array_declarator",
        ):
            continue  # the declared name itself
        name = alias[doc.node_text(n)]
        kind, at = _use(doc, n)
        if kind:
            events[name].append((at, kind))
    for name, evs in events.items():
        if params[name].const:
            continue
        evs.sort()
        kinds = set("".join(k for _, k in evs))
        if "w" not in kinds:
            out[name] = "in"
        elif evs and evs[0][1] == "w":
            out[name] = "out"
        else:
            out[name] = "inout"
    return out


def _base_pointer(doc: Document, node: tree_sitter.Node | None, alias: Mapping[str, str]) -> str | None:
    while node is not None and node.type in (
        "parenthesized_expression",
        "cast_expression",
        "binary_expression",
    ):
        if node.type == "binary_expression":
            left = _base_pointer(doc, node.child_by_field_name("left"), alias)
            if left is not None:
                return left
            node = node.child_by_field_name("right")
        elif node.type == "cast_expression":
            node = node.child_by_field_name("value")
        else:
            node = node.named_children[0] if node.named_children else None
    if node is not None and node.type == "identifier":
        return alias.get(doc.node_text(node))
    if node is not None and node.type == "pointer_expression" and doc.node_text(node).startswith("&"):
        arg = node.child_by_field_name("argument")
        if arg is not None and arg.type == "subscript_expression":
            return _base_pointer(doc, arg.child_by_field_name("argument"), alias)
    return None


def _use(doc: Document, ident: tree_sitter.Node) -> tuple[str, int]:
    """How an occurrence of a pointer is used ("r" read, "w" write, "rw" both, "" neither: a
    comparison with nullptr, a declaration's alias), and when: the byte where it happens in
    evaluation order (an assignment's store after its right-hand side)."""
    kind = _use_kind(doc, ident)
    node = ident
    while (
        node.parent is not None
        and node.parent.type != "assignment_expression"
        and node.parent.type
        not in (
            "expression_statement",
            "compound_statement",
        )
    ):
        node = node.parent
    up = node.parent
    if up is not None and up.type == "assignment_expression" and up.child_by_field_name("left") == node:
        return kind, up.end_byte
    return kind, ident.start_byte


def _use_kind(doc: Document, ident: tree_sitter.Node) -> str:
    node = ident
    parent = node.parent
    while parent is not None and (
        parent.type in ("parenthesized_expression", "cast_expression")
        or (
            parent.type == "binary_expression"
            and doc.node_text(parent.child_by_field_name("operator") or parent) in ("+", "-")
        )
    ):
        node, parent = parent, parent.parent
    if parent is None:
        return "r"
    if (
        parent.type == "binary_expression"
        or parent.type == "init_declarator"
        or parent.type == "condition_clause"
    ):
        return ""
    access = parent
    if (parent.type == "subscript_expression" and parent.child_by_field_name("argument") == node) or (
        parent.type == "pointer_expression" and doc.node_text(parent).startswith("*")
    ):
        access = parent
    elif parent.type == "pointer_expression":  # &p[i] handed on
        return "rw"
    elif parent.type == "argument_list":
        call = parent.parent
        fn = call.child_by_field_name("function") if call is not None else None
        name = doc.node_text(fn).split("::")[-1] if fn is not None else ""
        first = parent.named_children[0] == node if parent.named_children else False
        if _STORES.match(name) and first:
            return "w"
        if _LOADS.match(name):
            return "r"
        return "rw"
    else:
        return "r"
    up = access.parent
    while up is not None and up.type == "parenthesized_expression":  # `atomicAdd(&(y[i]), 1)`
        up = up.parent
    if up is not None and up.type == "pointer_expression" and doc.node_text(up).startswith("&"):
        grand = up.parent
        if grand is not None and grand.type == "argument_list":
            call = grand.parent
            fn = call.child_by_field_name("function") if call is not None else None
            name = doc.node_text(fn) if fn is not None else ""
            return "rw" if name.startswith("atomic") else "w" if _STORES.match(name) else "rw"
        return "rw"
    if up is not None and up.type == "assignment_expression" and up.child_by_field_name("left") == access:
        op = doc.node_text(up.child_by_field_name("operator") or up)
        return "w" if op == "=" else "rw"
    if up is not None and up.type == "update_expression":
        return "rw"
    return "r"


def _index_ranges(
    doc: Document, kernel: Kernel, specs: list[ArraySpec | ScalarSpec]
) -> list[ArraySpec | ScalarSpec]:
    """Integer inputs whose values index another array (token ids into an embedding) drawn with
    ``randint(0, rows)`` of that array: ``wte + ix * C`` with ``int ix = inp[...]``."""
    body = _body_node(doc, kernel)
    if body is None:
        return specs
    by_name = {s.name: s for s in specs}
    scalars = {s.name: s.value for s in specs if isinstance(s, ScalarSpec)}
    loaded: dict[str, str] = {}  # local -> int pointer it was read from
    for n in _walk(body):
        if n.type == "init_declarator":
            value = n.child_by_field_name("value")
            target = n.child_by_field_name("declarator")
            if (
                value is not None
                and value.type == "subscript_expression"
                and target is not None
                and target.type == "identifier"
            ):
                src = doc.node_text(value.child_by_field_name("argument") or value)
                s = by_name.get(src)
                if isinstance(s, ArraySpec) and not is_float(s.dtype) and s.role == "in":
                    loaded[doc.node_text(target)] = src
    ranges: dict[str, str] = {}
    for n in _walk(body):  # `bins[data[i]]`: data's values index bins
        index = n.child_by_field_name("indices") if n.type == "subscript_expression" else None
        inner = index.named_children[0] if index is not None and index.named_children else None
        outer = n.child_by_field_name("argument")
        if inner is not None and inner.type == "subscript_expression" and outer is not None:
            values_of = by_name.get(doc.node_text(inner.child_by_field_name("argument") or inner))
            into = by_name.get(doc.node_text(outer))
            if (
                isinstance(values_of, ArraySpec)
                and isinstance(into, ArraySpec)
                and not is_float(values_of.dtype)
            ):
                ranges.setdefault(values_of.name, into.count)
    for n in _walk(body):
        if n.type != "binary_expression" or doc.node_text(n.child_by_field_name("operator") or n) != "+":
            continue
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        for ptr, off in ((left, right), (right, left)):
            if ptr is None or off is None or ptr.type != "identifier":
                continue
            indexed = by_name.get(doc.node_text(ptr))
            if not isinstance(indexed, ArraySpec):
                continue
            factors = [doc.node_text(f).strip() for f in _product_factors(off)]
            idx = [f for f in factors if f in loaded]
            if len(idx) != 1:
                continue
            stride = [_rename(f, scalars) for f in factors if f != idx[0]]
            extent = _divide(indexed.count, stride)
            ranges.setdefault(loaded[idx[0]], extent)
    return [
        replace(s, dist=DistSpec("randint", ("0", ranges[s.name])))
        if isinstance(s, ArraySpec) and s.name in ranges
        else s
        for s in specs
    ]


def _product_factors(node: tree_sitter.Node | None) -> list[tree_sitter.Node]:
    """The factors of ``a * b * c``; of ``ix * C + c`` those of its first term (the indexed one)."""
    if node is None:
        return []
    op = node.child_by_field_name("operator") if node.type == "binary_expression" else None
    if op is not None and op.type == "*":
        return [
            *_product_factors(node.child_by_field_name("left")),
            *_product_factors(node.child_by_field_name("right")),
        ]
    if op is not None and op.type == "+":
        return _product_factors(node.child_by_field_name("left"))
    return [node]


def _divide(count: str, stride: list[str]) -> str:
    """``V*C`` / [``C``] -> ``V`` (a factor removed when present), else ``(count) / (stride)``."""
    try:
        tree = ast.parse(count, mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return count
    factors: list[ast.expr] = []

    def flat(n: ast.expr) -> None:
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult):
            flat(n.left)
            flat(n.right)
        else:
            factors.append(n)

    flat(tree)
    rest = [ast.unparse(f) for f in factors]
    leftover = []
    for s in stride:
        if s in rest:
            rest.remove(s)
        else:
            leftover.append(s)
    expr = "*".join(_paren(r) for r in rest) or "1"
    return f"({expr}) / ({'*'.join(leftover)})" if leftover else expr
