"""Spec expressions over sizes: evaluated to numbers in :mod:`sandbox.expr`'s grammar, with
this package's constants (``NULL``); renamed as text when specs are built."""

from __future__ import annotations

import ast
from collections.abc import Mapping

from sandbox import expr
from sandbox.expr import LIMIT, MATH_CONSTANTS, Number

# constants of <cmath>/<cfloat>/<climits> that specs may name (INFINITY only where values may be infinite)
CONSTANTS: dict[str, Number] = {
    **MATH_CONSTANTS,
    "NULL": 0,  # `arg p = NULL`: a null pointer argument
}
_NULLS = frozenset({"NULL", "nullptr", "0"})


def evaluate(text: str, env: Mapping[str, Number], *, finite: bool = True) -> Number:
    """Evaluate a spec expression; raises ValueError with a readable message (and nothing else,
    whatever the text).  ``finite=False`` lets the value be ``INFINITY``/``NAN`` (scalar values)."""
    return expr.number(text, env, constants=CONSTANTS, finite=finite)


def _eval_int(text: str, env: Mapping[str, Number], what: str) -> int:
    v = evaluate(text, env)
    if isinstance(v, float):
        if not v.is_integer():
            raise ValueError(f"{what} `{text}` is {v}, not an integer")
        v = int(v)
    if abs(v) > LIMIT:
        raise ValueError("value out of range (more than 2^62)")
    return v


def _rename(text: str, mapping: Mapping[str, str]) -> str:
    """``text`` with names replaced (each by a name or a number), re-printed."""
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return text

    class _T(ast.NodeTransformer):
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if node.id in mapping:
                return ast.parse(mapping[node.id], mode="eval").body
            return node

    return ast.unparse(_T().visit(tree))
