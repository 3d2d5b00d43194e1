"""Spec expressions: one grammar, evaluated two ways.

A spec's sizes, launch and work (``cdiv(n, block)``), and the per-element formulas of a request
(``values(i % 16)`` initial data, ``compare out[i < T, j < T] where j <= i`` regions, which reach
the worker as text in :class:`~sandbox.contract.Distribution` ``expr`` and
:class:`~sandbox.contract.Region` ``where``) are one small language: numbers, names,
:data:`MATH_CONSTANTS`, ``+ - * / // % << >>``, comparisons, ``and``/``or``/``not``,
``a if c else b`` and calls of :data:`FUNCTIONS`.  The text is untrusted: it is parsed with
:mod:`ast` and walked against that whitelist (:func:`expression_error`), never ``eval``'d.

One tree walker evaluates it two ways:

- :func:`number`: Python numbers, for the agent's spec expressions (integers stay exact and
  within 2^62);
- :func:`evaluate`, :func:`values`, :func:`mask`: numpy arrays over index arrays, for the worker
  (int64 or float64).

Both divide like C (integer ``/`` truncates), ``//`` and ``%`` floor, truth values are 0/1.
numpy is imported only when arrays are evaluated, so the contract and the language server, which
check and evaluate numbers, stay numpy-free.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from base.errors import InputError

if TYPE_CHECKING:
    import numpy as np

Number = int | float
V = TypeVar("V")


class ExpressionError(InputError, ValueError):
    """An expression is not in the grammar, or cannot be evaluated (division by zero, out of
    range); one line naming it."""


# name -> (minimum, maximum) arguments
FUNCTIONS: dict[str, tuple[int, int]] = {
    "min": (2, 16),
    "max": (2, 16),
    "cdiv": (2, 2),
    "pow": (2, 2),
    "sqrt": (1, 1),
    "abs": (1, 1),
    "exp": (1, 1),
    "log": (1, 1),
    "log2": (1, 1),
    "pow2": (1, 1),
    "sin": (1, 1),
    "cos": (1, 1),
}
# constants of <cmath>/<cfloat>/<climits> an expression may name
MATH_CONSTANTS: dict[str, Number] = {
    "INFINITY": math.inf,
    "NAN": math.nan,
    "M_PI": math.pi,
    "M_E": math.e,
    "FLT_MAX": 3.4028234663852886e38,
    "FLT_MIN": 1.1754943508222875e-38,
    "FLT_EPSILON": 1.1920928955078125e-07,
    "DBL_MAX": 1.7976931348623157e308,
    "INT_MAX": 2**31 - 1,
    "INT_MIN": -(2**31),
    "UINT_MAX": 2**32 - 1,
}
MAX_CHARS = 500
LIMIT = 1 << 62  # keeps a hostile expression from building huge integers
_NODES = (
    ast.Expression,
    ast.Constant,
    ast.Name,
    ast.Load,
    ast.BinOp,
    ast.UnaryOp,
    ast.BoolOp,
    ast.Compare,
    ast.Call,
    ast.IfExp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.LShift,
    ast.RShift,
    ast.USub,
    ast.UAdd,
    ast.Not,
    ast.And,
    ast.Or,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
)
_SIMPLE = re.compile(r"[\w.]+")  # a name or a number
_ALLOWED = "numbers, names, + - * / // % << >>, comparisons, and/or/not, `a if c else b`, " + ", ".join(
    FUNCTIONS
)


# ---------------------------------------------------------------------------------------- grammar


def _parse(text: str, names: Iterable[str], constants: Mapping[str, Number]) -> ast.expr:
    """The syntax tree of ``text`` over ``names`` and ``constants``; raises ValueError naming
    the first thing outside the grammar."""
    if len(text) > MAX_CHARS:
        raise ExpressionError(f"expression longer than {MAX_CHARS} characters")
    stripped = text.strip()
    try:
        tree = ast.parse(stripped, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        deep = isinstance(exc, RecursionError | MemoryError)
        reason = getattr(exc, "msg", None) or ("too deeply nested" if deep else "not text")
        shown = stripped[:80].encode("utf-8", "backslashreplace").decode("utf-8")  # no lone surrogate
        raise ExpressionError(f"`{shown}` is not an expression ({reason})") from None
    known = set(names)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    for node in ast.walk(tree):
        if not isinstance(node, _NODES):
            shown = ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__
            raise ExpressionError(f"`{shown[:80]}` is not allowed (use {_ALLOWED})")
        if isinstance(node, ast.Constant) and (
            isinstance(node.value, bool) or not isinstance(node.value, int | float)
        ):
            raise ExpressionError(f"`{node.value!r}`"[:80] + " is not a number")
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and abs(node.value) > LIMIT:
            raise ExpressionError(f"`{str(node.value)[:40]}` is out of range (more than 2^62)")
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else ""
            if name not in FUNCTIONS:
                raise ExpressionError(f"`{ast.unparse(node)[:80]}` is not a call of {', '.join(FUNCTIONS)}")
            low, high = FUNCTIONS[name]
            if node.keywords or not low <= len(node.args) <= high:
                raise ExpressionError(f"{name} takes {low if low == high else f'{low} to {high}'} arguments")
        elif (
            isinstance(node, ast.Name)
            and id(node) not in called
            and node.id not in known
            and node.id not in constants
        ):
            raise ExpressionError(
                f"unknown name `{node.id[:40]}` (known: {', '.join(sorted(known)) or 'none'})"
            )
    return tree.body


def operand(text: str) -> str:
    """``text`` ready to be an operand of a larger expression: a name or number as it is, anything
    else in parentheses."""
    return text if _SIMPLE.fullmatch(text) else f"({text})"


def expression_error(text: str, names: Iterable[str]) -> str:
    """Why ``text`` is not an expression over ``names`` and :data:`MATH_CONSTANTS` ('' when it is)."""
    try:
        _parse(text, names, MATH_CONSTANTS)
    except ValueError as exc:
        return str(exc)
    return ""


# ---------------------------------------------------------------------------------------- the walk


@dataclass(frozen=True)
class _Semantics(Generic[V]):
    """What each construct of the grammar means over values of type ``V``."""

    number: Callable[[Number], V]  # a literal or a constant
    binary: Mapping[type[ast.operator], Callable[[V, V], V]]
    compare: Mapping[type[ast.cmpop], Callable[[V, V], V]]  # a truth value (0/1)
    both: Callable[[V, V], V]  # truth of ``a and b``
    either: Callable[[V, V], V]  # truth of ``a or b``
    negate: Callable[[V], V]
    invert: Callable[[V], V]  # truth of ``not a``
    select: Callable[[V, V, V], V]  # ``a if c else b``: (c, a, b)
    functions: Mapping[str, Callable[..., V]]
    checked: Callable[[V], V]  # every computed value passes here


def _walk(node: ast.AST, env: Mapping[str, V], constants: Mapping[str, Number], ev: _Semantics[V]) -> V:
    """The value of a tree :func:`_parse` accepted."""

    def walk(n: ast.AST) -> V:
        return _walk(n, env, constants, ev)

    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return ev.number(node.value)
    if isinstance(node, ast.Name):
        return env[node.id] if node.id in env else ev.number(constants[node.id])
    if isinstance(node, ast.BinOp):
        return ev.checked(ev.binary[type(node.op)](walk(node.left), walk(node.right)))
    if isinstance(node, ast.UnaryOp):
        value = walk(node.operand)
        if isinstance(node.op, ast.Not):
            return ev.invert(value)
        return ev.negate(value) if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Compare):
        left = walk(node.left)
        met: V | None = None
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = walk(right_node)
            truth = ev.compare[type(op)](left, right)
            met = truth if met is None else ev.both(met, truth)
            left = right
        assert met is not None  # a comparison has at least one operator
        return met
    if isinstance(node, ast.BoolOp):
        combine = ev.both if isinstance(node.op, ast.And) else ev.either
        return functools.reduce(combine, (walk(v) for v in node.values))
    if isinstance(node, ast.IfExp):
        return ev.select(walk(node.test), walk(node.body), walk(node.orelse))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        name = node.func.id
        args = [walk(a) for a in node.args]
        try:
            return ev.checked(ev.functions[name](*args))
        except ValueError as exc:
            if str(exc) != "math domain error":
                raise
            raise ExpressionError(
                f"`{ast.unparse(node)}` cannot be evaluated (outside the domain of {name})"
            ) from None
    raise ExpressionError(f"`{ast.unparse(node)}` is not allowed")  # _parse refused it first


# ---------------------------------------------------------------------------------------- numbers


def _checked(v: Number) -> Number:
    if isinstance(v, int) and abs(v) > LIMIT:
        raise ExpressionError("value out of range (more than 2^62)")
    return v


def _c_divide(a: Number, b: Number) -> Number:
    """C's ``/``: truncating on integers, true division on floats."""
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _shift(op: Callable[[int, int], int]) -> Callable[[Number, Number], Number]:
    def apply(a: Number, b: Number) -> Number:
        if not isinstance(a, int) or not isinstance(b, int) or not 0 <= b < 64:
            raise ExpressionError("shifts take integers and a shift count in 0..63")
        return op(a, b)

    return apply


def _cdiv(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    return math.ceil(a / b)


def _pow(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int) and b >= 0:
        if abs(a) > 1 and b > 62:
            raise ExpressionError("value out of range")
        return a**b
    return math.pow(a, b)


def _sqrt(a: Number) -> Number:
    if a < 0:
        raise ExpressionError(f"sqrt of a negative number ({a})")
    return math.sqrt(a)


def _truth(test: Callable[[Number, Number], bool]) -> Callable[[Number, Number], Number]:
    return lambda a, b: int(test(a, b))


_NUMBERS: _Semantics[Number] = _Semantics(
    number=_checked,
    binary={
        ast.Add: operator.add,
        ast.Sub: operator.sub,
        ast.Mult: operator.mul,
        ast.Div: _c_divide,
        ast.FloorDiv: operator.floordiv,
        ast.Mod: operator.mod,
        ast.LShift: _shift(operator.lshift),
        ast.RShift: _shift(operator.rshift),
    },
    compare={
        ast.Eq: _truth(operator.eq),
        ast.NotEq: _truth(operator.ne),
        ast.Lt: _truth(operator.lt),
        ast.LtE: _truth(operator.le),
        ast.Gt: _truth(operator.gt),
        ast.GtE: _truth(operator.ge),
    },
    both=lambda a, b: int(bool(a) and bool(b)),
    either=lambda a, b: int(bool(a) or bool(b)),
    negate=operator.neg,
    invert=lambda a: int(not a),
    select=lambda c, a, b: a if c else b,
    functions={
        "min": min,
        "max": max,
        "cdiv": _cdiv,
        "pow": _pow,
        "sqrt": _sqrt,
        "abs": abs,
        "exp": math.exp,
        "log": math.log,
        "log2": math.log2,
        "pow2": lambda a: int(isinstance(a, int) and a > 0 and a & (a - 1) == 0),
        "sin": math.sin,
        "cos": math.cos,
    },
    checked=_checked,
)


def number(
    text: str,
    env: Mapping[str, Number],
    *,
    constants: Mapping[str, Number] = MATH_CONSTANTS,
    finite: bool = True,
) -> Number:
    """The value of ``text`` with ``env``'s names (and ``constants``) bound to numbers; raises
    ValueError with a readable message (and nothing else, whatever the text).  ``finite=False``
    lets the value be ``INFINITY``/``NAN``."""
    tree = _parse(text, env, constants)
    shown = text.strip()
    try:
        value = _walk(tree, env, constants, _NUMBERS)
    except ZeroDivisionError:
        raise ExpressionError(f"`{shown}` divides by zero") from None
    except (ArithmeticError, TypeError, RecursionError):  # overflow of a float, math domain errors
        raise ExpressionError(f"`{shown}` cannot be evaluated (a value is out of range)") from None
    if finite and isinstance(value, float) and not math.isfinite(value):
        raise ExpressionError(f"`{shown}` is {value}, not a finite number")
    return value


# ---------------------------------------------------------------------------------------- arrays


@functools.cache
def _arrays() -> _Semantics[Any]:
    import numpy as np

    def is_int(x: np.ndarray) -> bool:
        return bool(np.issubdtype(x.dtype, np.integer))

    def truth(x: np.ndarray) -> np.ndarray:
        return np.asarray(x).astype(np.int64)

    def c_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if is_int(a) and is_int(b):
            q = np.abs(a) // np.abs(b)
            return np.where((a >= 0) == (b >= 0), q, -q)
        return np.true_divide(a, b)

    def shift(op: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
        def apply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            if not (is_int(a) and is_int(b)) or b.min(initial=0) < 0 or b.max(initial=0) > 63:
                raise ExpressionError("shifts take integers and a shift count in 0..63")
            return op(a, b)

        return apply

    def compare(op: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
        return lambda a, b: truth(op(a, b))

    def cdiv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return -(-a // b) if is_int(a) and is_int(b) else np.ceil(a / b)

    def power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if is_int(a) and is_int(b) and b.min(initial=0) >= 0:
            return np.power(a, b)
        return np.power(a.astype(np.float64), b)

    def pow2(a: np.ndarray) -> np.ndarray:
        return truth((a > 0) & ((a & (a - 1)) == 0)) if is_int(a) else np.zeros_like(a, np.int64)

    return _Semantics(
        number=lambda v: np.asarray(v, dtype=np.int64 if isinstance(v, int) else np.float64),
        binary={
            ast.Add: np.add,
            ast.Sub: np.subtract,
            ast.Mult: np.multiply,
            ast.Div: c_divide,
            ast.FloorDiv: np.floor_divide,
            ast.Mod: np.mod,
            ast.LShift: shift(np.left_shift),
            ast.RShift: shift(np.right_shift),
        },
        compare={
            ast.Eq: compare(np.equal),
            ast.NotEq: compare(np.not_equal),
            ast.Lt: compare(np.less),
            ast.LtE: compare(np.less_equal),
            ast.Gt: compare(np.greater),
            ast.GtE: compare(np.greater_equal),
        },
        both=lambda a, b: truth((a != 0) & (b != 0)),
        either=lambda a, b: truth((a != 0) | (b != 0)),
        negate=np.negative,
        invert=lambda a: truth(a == 0),
        select=lambda c, a, b: np.where(c != 0, a, b),
        functions={
            "min": lambda *xs: np.minimum.reduce(np.broadcast_arrays(*xs)),
            "max": lambda *xs: np.maximum.reduce(np.broadcast_arrays(*xs)),
            "cdiv": cdiv,
            "pow": power,
            "sqrt": np.sqrt,
            "abs": np.abs,
            "exp": np.exp,
            "log": np.log,
            "log2": np.log2,
            "pow2": pow2,
            "sin": np.sin,
            "cos": np.cos,
        },
        checked=np.asarray,
    )


def evaluate(text: str, env: Mapping[str, np.ndarray]) -> np.ndarray:
    """The value of element expression ``text`` with ``env``'s names bound to (broadcastable)
    integer arrays; raises ValueError with a readable message, whatever the text."""
    import numpy as np

    tree = _parse(text, env, MATH_CONSTANTS)
    try:
        with np.errstate(divide="raise", over="ignore", invalid="raise"):
            return np.asarray(_walk(tree, env, MATH_CONSTANTS, _arrays()))
    except FloatingPointError as exc:
        raise ExpressionError(f"`{text.strip()}` cannot be evaluated ({exc})") from None
    except (ArithmeticError, TypeError, RecursionError, MemoryError):
        raise ExpressionError(f"`{text.strip()}` cannot be evaluated (a value is out of range)") from None


def values(text: str, count: int) -> np.ndarray:
    """``text`` evaluated at every index ``i`` in 0..count-1 (float64 or int64)."""
    import numpy as np

    out = evaluate(text, {"i": np.arange(count, dtype=np.int64)})
    return np.broadcast_to(out, (count,))


def mask(text: str, index: Sequence[str], shape: Sequence[int]) -> np.ndarray:
    """Which elements of a row-major array of ``shape`` meet ``text`` (a condition over one index
    name per dimension), flattened: a bool array of ``prod(shape)`` elements."""
    import numpy as np

    grids = np.ogrid[tuple(slice(0, n) for n in shape)] if shape else []
    env = {name: g.astype(np.int64) for name, g in zip(index, grids, strict=True)}
    met = evaluate(text, env) != 0
    return np.broadcast_to(met, tuple(shape)).reshape(math.prod(shape))
