"""Element expressions: per-element formulas of a request, evaluated with numpy over index arrays.

A spec's ``values(i % 16)`` initial data and ``compare out[i < T, j < T] where j <= i`` regions
reach the worker as text (:class:`~sandbox.contract.Distribution` ``expr``,
:class:`~sandbox.contract.Region` ``where``).  The text is untrusted: it is parsed with
:mod:`ast` and walked against the whitelist of :func:`sandbox.contract.expression_error`
(checked first), never ``eval``'d.  Values are int64 or float64 arrays; integer ``/`` truncates
like C, ``//`` and ``%`` floor like the spec's size expressions; truth values are 0/1.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from sandbox.contract import MATH_CONSTANTS, expression_error

Array = np.ndarray


def _int(x: Array) -> bool:
    return np.issubdtype(x.dtype, np.integer)


def _c_divide(a: Array, b: Array) -> Array:
    if _int(a) and _int(b):
        q = np.abs(a) // np.abs(b)
        return np.where((a >= 0) == (b >= 0), q, -q)
    return np.true_divide(a, b)


def _shift(op: Callable[[Array, Array], Array]) -> Callable[[Array, Array], Array]:
    def apply(a: Array, b: Array) -> Array:
        if not (_int(a) and _int(b)) or b.min(initial=0) < 0 or b.max(initial=0) > 63:
            raise ValueError("shifts take integers and a shift count in 0..63")
        return op(a, b)

    return apply


_BINOPS: dict[type[ast.operator], Callable[[Array, Array], Array]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: _c_divide,
    ast.FloorDiv: np.floor_divide,
    ast.Mod: np.mod,
    ast.LShift: _shift(np.left_shift),
    ast.RShift: _shift(np.right_shift),
}
_COMPARE: dict[type[ast.cmpop], Callable[[Array, Array], Array]] = {
    ast.Eq: np.equal,
    ast.NotEq: np.not_equal,
    ast.Lt: np.less,
    ast.LtE: np.less_equal,
    ast.Gt: np.greater,
    ast.GtE: np.greater_equal,
}


def _cdiv(a: Array, b: Array) -> Array:
    return -(-a // b) if _int(a) and _int(b) else np.ceil(a / b)


def _pow(a: Array, b: Array) -> Array:
    if _int(a) and _int(b) and b.min(initial=0) >= 0:
        return np.power(a, b)
    return np.power(a.astype(np.float64), b)


def _pow2(a: Array) -> Array:
    return ((a > 0) & ((a & (a - 1)) == 0)).astype(np.int64) if _int(a) else np.zeros_like(a, np.int64)


_FUNCS: dict[str, Callable[..., Array]] = {
    "min": lambda *xs: np.minimum.reduce(np.broadcast_arrays(*xs)),
    "max": lambda *xs: np.maximum.reduce(np.broadcast_arrays(*xs)),
    "cdiv": _cdiv,
    "pow": _pow,
    "sqrt": np.sqrt,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "log2": np.log2,
    "pow2": _pow2,
    "sin": np.sin,
    "cos": np.cos,
}


def evaluate(text: str, env: Mapping[str, Array]) -> Array:
    """The value of element expression ``text`` with ``env``'s names bound to (broadcastable)
    integer arrays; raises ValueError with a readable message, whatever the text."""
    error = expression_error(text, env)
    if error:
        raise ValueError(error)
    tree = ast.parse(text.strip(), mode="eval")
    try:
        with np.errstate(divide="raise", over="ignore", invalid="raise"):
            return _eval(tree.body, env)
    except FloatingPointError as exc:
        raise ValueError(f"`{text.strip()}` cannot be evaluated ({exc})") from None
    except (ArithmeticError, TypeError, RecursionError, MemoryError):
        raise ValueError(f"`{text.strip()}` cannot be evaluated (a value is out of range)") from None


def _truth(x: Array) -> Array:
    return x.astype(np.int64)


def _eval(node: ast.AST, env: Mapping[str, Array]) -> Array:
    if isinstance(node, ast.Constant):
        return np.asarray(node.value, dtype=np.int64 if isinstance(node.value, int) else np.float64)
    if isinstance(node, ast.Name):
        value = env[node.id] if node.id in env else MATH_CONSTANTS[node.id]
        return np.asarray(value)
    if isinstance(node, ast.BinOp):
        return np.asarray(_BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env)))
    if isinstance(node, ast.UnaryOp):
        v = _eval(node.operand, env)
        if isinstance(node.op, ast.Not):
            return _truth(v == 0)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Compare):
        left, met = _eval(node.left, env), np.asarray(True)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, env)
            met = met & _COMPARE[type(op)](left, right)
            left = right
        return _truth(met)
    if isinstance(node, ast.BoolOp):
        values = [_eval(v, env) != 0 for v in node.values]
        combine = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        return _truth(combine.reduce(np.broadcast_arrays(*values)))
    if isinstance(node, ast.IfExp):
        return np.where(_eval(node.test, env) != 0, _eval(node.body, env), _eval(node.orelse, env))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return np.asarray(_FUNCS[node.func.id](*(_eval(a, env) for a in node.args)))
    raise ValueError(f"`{ast.unparse(node)}` is not allowed")  # expression_error refused it first


def values(text: str, count: int) -> Array:
    """``text`` evaluated at every index ``i`` in 0..count-1 (float64 or int64)."""
    out = evaluate(text, {"i": np.arange(count, dtype=np.int64)})
    return np.broadcast_to(out, (count,))


def mask(text: str, index: Sequence[str], shape: Sequence[int]) -> Array:
    """Which elements of a row-major array of ``shape`` meet ``text`` (a condition over one index
    name per dimension), flattened: a bool array of ``prod(shape)`` elements."""
    grids = np.ogrid[tuple(slice(0, n) for n in shape)] if shape else []
    env = {name: g.astype(np.int64) for name, g in zip(index, grids, strict=True)}
    met = evaluate(text, env) != 0
    return np.broadcast_to(met, tuple(shape)).reshape(math.prod(shape))
