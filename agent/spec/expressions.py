"""Spec expressions: integer arithmetic over sizes, evaluated by walking their syntax tree."""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping

from sandbox.contract import (
    MATH_CONSTANTS,
)

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
