"""What a Python program hands to a PyTorch extension's functions: the shapes of its tensors.

A kernel launched from ``torch::Tensor gelu(torch::Tensor x)`` gets its sizes from the Python
code that calls the bound function (``m.def("gelu", &gelu)``): ``ext.gelu(torch.randn(B, T,
device="cuda"))``, or a name bound to such a tensor.  Read with Python's own :mod:`ast`; each
dimension is an integer literal or a name bound to one (its name becomes the spec's size name).
Anything else is unknown, never guessed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

_FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty", "full", "randint"})
_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Dim:
    name: str  # "" for a literal
    value: int
    where: str  # file:line of the value


Shape = tuple[Dim | None, ...]


def call_shapes(paths: list[Path], function: str) -> list[Shape | None] | None:
    """The shape of each positional argument of the first call ``X.function(...)`` found in
    ``paths`` (None for an argument that is not a tensor of known shape); None when no call."""
    for path in paths:
        try:
            if path.stat().st_size > _MAX_BYTES:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if function not in text:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        ints, tensors = _bindings(tree, path.name)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == function
            ):
                return [_shape(a, ints, tensors, path.name) for a in node.args]
    return None


def _bindings(tree: ast.AST, file: str) -> tuple[dict[str, Dim], dict[str, ast.expr]]:
    """Names bound (anywhere, first binding wins) to an integer literal and to a call."""
    ints: dict[str, Dim] = {}
    calls: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            pairs: list[tuple[ast.expr, ast.expr]] = []
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                pairs = list(zip(target.elts, node.value.elts, strict=False))
            else:
                pairs = [(target, node.value)]
            for t, v in pairs:
                if not isinstance(t, ast.Name):
                    continue
                if isinstance(v, ast.Constant) and type(v.value) is int:
                    ints.setdefault(t.id, Dim(t.id, v.value, f"{file}:{v.lineno}"))
                elif isinstance(v, ast.Call):
                    calls.setdefault(t.id, v)
    return ints, calls


def _shape(arg: ast.expr, ints: dict[str, Dim], tensors: dict[str, ast.expr], file: str) -> Shape | None:
    if isinstance(arg, ast.Name):
        bound = tensors.get(arg.id)
        if bound is None:
            return None
        arg = bound
    if not isinstance(arg, ast.Call):
        return None
    fn = arg.func
    name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
    if name not in _FACTORIES:
        return None
    dims = arg.args[2:] if name == "randint" else arg.args
    if len(dims) == 1 and isinstance(dims[0], ast.Tuple | ast.List):
        dims = list(dims[0].elts)
    if name == "full" and dims and isinstance(arg.args[0], ast.Tuple | ast.List):
        dims = list(arg.args[0].elts)
    return tuple(_dim(d, ints, file) for d in dims)


def _dim(node: ast.expr, ints: dict[str, Dim], file: str) -> Dim | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Dim("", node.value, f"{file}:{node.lineno}")
    if isinstance(node, ast.Name):
        return ints.get(node.id)
    return None
