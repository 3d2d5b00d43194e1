"""What the interpreter knows of host code it does not run: the C/C++ library and CUDA runtime
functions it models, the device the benchmarks run on, number literals, the ranges of drawn
values, and the spellings of pointers and declarators."""

from __future__ import annotations

import re
from dataclasses import dataclass

import tree_sitter

from cudasrc.host.values import Buffer, Num
from cudasrc.source import Document

_CDIV = frozenset(
    {"CEIL_DIV", "CEILDIV", "DIV_UP", "DIVUP", "div_up", "ceil_div", "iDivUp", "cdiv", "ceildiv"}
)
_MATH = {
    "min": "min", "max": "max", "MIN": "min", "MAX": "max", "fminf": "min", "fmaxf": "max", "fmin": "min", "fmax": "max",
    "pow": "pow", "powf": "pow", "sqrt": "sqrt", "sqrtf": "sqrt", "exp": "exp", "expf": "exp",
    "log": "log", "logf": "log", "log2": "log2", "log2f": "log2", "abs": "abs", "fabs": "abs", "fabsf": "abs",
}  # fmt: skip
# C's and C++'s number parsers: the command line's arguments read as numbers (True: a float)
_PARSERS = {
    "atoi": False, "atol": False, "atoll": False, "strtol": False, "strtoul": False, "strtoll": False,
    "strtoull": False, "stoi": False, "stol": False, "stoll": False, "stoul": False, "stoull": False,
    "atof": True, "strtof": True, "strtod": True, "stof": True, "stod": True,
}  # fmt: skip
# what the runtime reports of the device the benchmarks run on (an H100 SXM, 80 GB), for the
# programs that size their problem from it (`cudaGetDeviceProperties`, `cudaFuncGetAttributes`)
_DEVICE = (
    ("totalGlobalMem", "85045477376"), ("sharedMemPerBlock", "49152"), ("regsPerBlock", "65536"),
    ("warpSize", "32"), ("maxThreadsPerBlock", "1024"), ("totalConstMem", "65536"), ("major", "9"),
    ("minor", "0"), ("multiProcessorCount", "132"), ("l2CacheSize", "52428800"),
    ("maxThreadsPerMultiProcessor", "2048"), ("sharedMemPerMultiprocessor", "233472"),
    ("sharedMemPerBlockOptin", "232448"), ("regsPerMultiprocessor", "65536"),
)  # fmt: skip
_FUNC_ATTRIBUTES = (("maxThreadsPerBlock", "1024"), ("sharedSizeBytes", "0"))
_MALLOCS = frozenset(
    {"cudaMalloc", "cudaMallocManaged", "cudaMallocAsync", "cudaMallocHost", "cudaHostAlloc"}
)
_TENSOR_LIKE = frozenset({"empty_like", "zeros_like", "ones_like", "rand_like", "randn_like"})
_TENSOR_NEW = frozenset({"empty", "zeros", "ones", "rand", "randn", "full"})


def _exits(doc: Document, node: tree_sitter.Node) -> bool:
    """Whether a branch leaves the program: ``return``, ``exit(...)``, ``abort()``, ``goto``."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("return_statement", "goto_statement", "throw_statement"):
            return True
        if n.type == "call_expression":
            fn = n.child_by_field_name("function")
            if fn is not None and doc.node_text(fn) in ("exit", "abort", "std::exit", "std::abort"):
                return True
        stack.extend(n.named_children)
    return False


def number_literal(text: str) -> Num | None:
    """A C/C++ number literal (``0x1F``, ``1e-3f``, ``256u``) as a spec number; None if not one."""
    t = text.replace("'", "")
    if t.lower().startswith("0x"):
        t = re.sub(r"[uUlL]+$", "", t)
        try:
            return Num(str(int(t, 16)))
        except ValueError:
            return None
    is_float = bool(re.search(r"[.eE]", t))
    t = re.sub(r"[fFlL]$", "", t) if is_float else re.sub(r"[uUlLzZ]+$", "", t)
    try:
        return Num(
            repr(float(t)) if is_float else str(int(t, 8 if t.startswith("0") and len(t) > 1 else 10)),
            None,
            is_float,
        )
    except ValueError:
        return None


def _buffer(total: Num, where: str) -> Buffer:
    if total.sized is not None:
        return Buffer(total.sized[0], total.sized[1], where)
    return Buffer(total.expr, 1, where)


_RAND_MAX = 2147483647  # glibc's


@dataclass(frozen=True)
class _Range:
    """Values a host expression can take: ``low``..``high``; ``int_type``: computed in a C integer
    type (``/`` truncates, ``%`` applies); ``integral``: every value is a whole number;
    ``random``: drawn (``rand()``), not a constant; ``arange``: each element its own index."""

    low: float
    high: float
    int_type: bool
    integral: bool
    random: bool
    arange: bool = False


def _interval(op: str, a: _Range, b: _Range) -> _Range | None:
    """Interval arithmetic for :meth:`_Interp.drawn` (``%`` by a positive constant, ``/`` of
    floating values by a positive range)."""
    int_type, integral, random = a.int_type and b.int_type, a.integral and b.integral, a.random or b.random
    if op in ("+", "-"):
        lo, hi = (a.low + b.low, a.high + b.high) if op == "+" else (a.low - b.high, a.high - b.low)
        return _Range(lo, hi, int_type, integral, random)
    if op == "*":
        products = [x * y for x in (a.low, a.high) for y in (b.low, b.high)]
        return _Range(min(products), max(products), int_type, integral, random)
    if op == "/" and b.low > 0 and not int_type:
        quotients = [x / y for x in (a.low, a.high) for y in (b.low, b.high)]
        return _Range(min(quotients), max(quotients), False, False, random)
    if op == "%" and int_type and not b.random and b.low == b.high and b.low > 0 and a.low >= 0:
        return _Range(0.0, min(a.high, b.low - 1), True, True, random)
    return None


def _pointer_name(doc: Document, node: tree_sitter.Node) -> str:
    """The variable a pointer argument names, through casts and parentheses (``(void *)d_x``,
    ``(float2 *)d_x``, ``d_x + 1`` is not one: ``""``)."""
    while node.type in ("cast_expression", "parenthesized_expression"):
        inner = node.child_by_field_name("value") if node.type == "cast_expression" else None
        nxt = inner if inner is not None else (node.named_children[-1] if node.named_children else None)
        if nxt is None:
            return ""
        node = nxt
    return doc.node_text(node) if node.type == "identifier" else ""


def _address_of(doc: Document, node: tree_sitter.Node) -> str:
    """``&p`` (through casts, ``reinterpret_cast<void**>(...)`` and parentheses) -> ``p``."""
    while node.type in ("cast_expression", "parenthesized_expression", "call_expression"):
        if node.type == "call_expression":
            fn = node.child_by_field_name("function")
            cast = (
                fn.child_by_field_name("name") if fn is not None and fn.type == "template_function" else None
            )
            args = node.child_by_field_name("arguments")
            if cast is None or doc.node_text(cast) not in ("reinterpret_cast", "static_cast") or args is None:
                return ""
            node = args.named_children[0] if args.named_children else node
            if node.type == "call_expression":
                return ""
            continue
        inner = (
            node.child_by_field_name("value")
            if node.type == "cast_expression"
            else (node.named_children[0] if node.named_children else None)
        )
        if inner is None:
            return ""
        node = inner
    if node.type == "pointer_expression" and doc.node_text(node).lstrip().startswith("&"):
        arg = node.child_by_field_name("argument")
        return doc.node_text(arg) if arg is not None and arg.type == "identifier" else ""
    return ""


def _declarator_types(node: tree_sitter.Node) -> set[str]:
    out: set[str] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        out.add(n.type)
        d = n.child_by_field_name("declarator")
        if d is not None:
            stack.append(d)
    return out
