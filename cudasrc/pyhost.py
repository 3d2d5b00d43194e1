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

from cudasrc.project import display_path

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
        ints, tensors = _bindings(tree, display_path(str(path)))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == function
            ):
                return [_shape(a, ints, tensors, display_path(str(path))) for a in node.args]
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


# ---------------------------------------------------------------------------------------- Kernel Tuner

_NUMPY_ITEMSIZE = {
    "float16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2,
    "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "bool_": 1, "complex64": 8,
}  # fmt: skip
_ARRAYS = frozenset({"randn", "rand", "random", "random_sample", "zeros", "ones", "empty", "full", "randint"})
_LIKE = frozenset({"zeros_like", "ones_like", "empty_like", "copy"})


@dataclass(frozen=True)
class Array:
    """A NumPy array argument: its shape, its item size (0: not said) and whether it is zeros."""

    dims: tuple[Dim | None, ...]
    itemsize: int
    zero: bool = False


@dataclass(frozen=True)
class Scalar:
    """``np.int32(n)`` (``dim``) or ``np.float32(0.5)`` (``value``)."""

    dim: Dim | None = None
    value: float | None = None


@dataclass(frozen=True)
class TunerCall:
    """``tune_kernel``/``run_kernel(name, source, problem_size, arguments, params, grid_div_x=...)``:
    what Kernel Tuner launches first.  ``params``: each tunable parameter at its first value (each
    one a ``#define`` in the kernel's source); ``grid_div``: per axis, the parameter names the
    problem size is divided by (None: Kernel Tuner's default, ``block_size_x``/``_y``/``_z``)."""

    where: str
    problem: tuple[Dim | None, ...]
    params: tuple[Dim, ...]
    grid_div: tuple[tuple[str, ...] | None, ...]
    args: tuple[Array | Scalar | None, ...]


def tuner_call(paths: list[Path], kernel: str) -> TunerCall | None:
    """The first Kernel Tuner call in ``paths`` that runs ``kernel``; None when there is none."""
    for path in paths:
        tree = _tree(path, kernel)
        if tree is None:
            continue
        names, items = _names(tree), _items(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or _callee(node) not in ("tune_kernel", "run_kernel"):
                continue
            given = dict(
                zip(
                    ("kernel_name", "kernel_source", "problem_size", "arguments", "params"),
                    node.args,
                    strict=False,
                )
            )
            given |= {k.arg: k.value for k in node.keywords if k.arg}
            named = _resolve(given.get("kernel_name"), names)
            if not (isinstance(named, ast.Constant) and named.value == kernel):
                continue
            return _tuner(node, given, names, items, display_path(str(path)))
    return None


def _tree(path: Path, needle: str) -> ast.Module | None:
    try:
        if path.stat().st_size > _MAX_BYTES:
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if needle not in text:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None


def _names(tree: ast.AST) -> dict[str, ast.expr]:
    """Each name's first binding (``x = ...``, tuple unpacking) anywhere in the file."""
    out: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = list(zip(target.elts, node.value.elts, strict=False))
                else:
                    pairs = [(target, node.value)]
                for t, v in pairs:
                    if isinstance(t, ast.Name):
                        out.setdefault(t.id, v)
    return out


def _items(tree: ast.AST) -> dict[str, list[tuple[str, ast.expr]]]:
    """``d["key"] = value`` assignments, by the dictionary's name, in file order."""
    out: dict[str, list[tuple[str, ast.expr]]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            t = node.targets[0]
            if (
                isinstance(t, ast.Subscript)
                and isinstance(t.value, ast.Name)
                and isinstance(t.slice, ast.Constant)
                and isinstance(t.slice.value, str)
            ):
                out.setdefault(t.value.id, []).append((t.slice.value, node.value))
    return out


def _resolve(node: ast.expr | None, names: dict[str, ast.expr], depth: int = 0) -> ast.expr | None:
    while isinstance(node, ast.Name) and node.id in names and depth < 16:
        node, depth = names[node.id], depth + 1
    return node


def _callee(call: ast.Call) -> str:
    fn = call.func
    return fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""


def _int(node: ast.expr | None, names: dict[str, ast.expr], file: str, depth: int = 0) -> Dim | None:
    """An integer: a literal, a name bound to one (named), or arithmetic over them (a literal)."""
    if node is None or depth > 16:
        return None
    if isinstance(node, ast.Name):
        bound = _int(names.get(node.id), names, file, depth + 1)
        return Dim(node.id, bound.value, bound.where) if bound is not None else None
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Dim("", node.value, f"{file}:{node.lineno}")
    if isinstance(node, ast.Call) and _callee(node) in ("int32", "int64", "uint32", "int") and node.args:
        return _int(node.args[0], names, file, depth + 1)
    if isinstance(node, ast.BinOp):
        a, b = _int(node.left, names, file, depth + 1), _int(node.right, names, file, depth + 1)
        if a is None or b is None:
            return None
        ops = {ast.Add: a.value + b.value, ast.Sub: a.value - b.value, ast.Mult: a.value * b.value}
        if isinstance(node.op, ast.FloorDiv) and b.value:
            return Dim("", a.value // b.value, a.where)
        if isinstance(node.op, ast.LShift) and 0 <= b.value < 63:
            return Dim("", a.value << b.value, a.where)
        value = ops.get(type(node.op))
        return Dim("", value, a.where) if value is not None else None
    return None


def _dims(node: ast.expr | None, names: dict[str, ast.expr], file: str) -> tuple[Dim | None, ...]:
    node = _resolve(node, names) if isinstance(node, ast.Name) and not _int(node, names, file) else node
    if isinstance(node, ast.Tuple | ast.List):
        return tuple(_int(e, names, file) for e in node.elts)
    return (_int(node, names, file),)


def _itemsize(node: ast.expr | None) -> int:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value
    return _NUMPY_ITEMSIZE.get(name, 0)


def _array_or_scalar(
    node: ast.expr | None, names: dict[str, ast.expr], file: str, depth: int = 0
) -> Array | Scalar | None:
    node = _resolve(node, names)
    if not isinstance(node, ast.Call) or depth > 16:
        return None
    name = _callee(node)
    if name == "astype" and isinstance(node.func, ast.Attribute) and node.args:
        inner = _array_or_scalar(node.func.value, names, file, depth + 1)
        return Array(inner.dims, _itemsize(node.args[0]), inner.zero) if isinstance(inner, Array) else None
    if name in _NUMPY_ITEMSIZE and node.args:  # np.int32(n), np.float32(0.5)
        if name.startswith(("int", "uint")):
            return Scalar(dim=_int(node.args[0], names, file))
        value = node.args[0]
        return (
            Scalar(value=float(value.value))
            if isinstance(value, ast.Constant) and isinstance(value.value, int | float)
            else Scalar()
        )
    keywords = {k.arg: k.value for k in node.keywords if k.arg}
    if name in _LIKE and node.args:
        like = _array_or_scalar(node.args[0], names, file, depth + 1)
        return Array(like.dims, like.itemsize, name == "zeros_like") if isinstance(like, Array) else None
    if name not in _ARRAYS:
        return None
    if name == "randint":
        shape = keywords.get("size", node.args[2] if len(node.args) > 2 else None)
        dims = _dims(shape, names, file)
    elif name in ("zeros", "ones", "empty", "full", "random", "random_sample") and node.args:
        dims = _dims(node.args[0], names, file)
    else:  # randn(d0, d1, ...), rand(d0, ...)
        dims = tuple(_int(a, names, file) for a in node.args)
    return Array(dims, _itemsize(keywords.get("dtype")), name == "zeros")


def _first(node: ast.expr | None, names: dict[str, ast.expr], file: str) -> Dim | None:
    """A tunable parameter's first value: ``[32, 64]``, ``range(32, 1025, 32)``, or a number."""
    node = _resolve(node, names)
    if isinstance(node, ast.List | ast.Tuple) and node.elts:
        return _int(node.elts[0], names, file)
    if isinstance(node, ast.Call) and _callee(node) == "range" and node.args:
        return _int(node.args[0], names, file) if len(node.args) > 1 else Dim("", 0, f"{file}:{node.lineno}")
    return _int(node, names, file)


def _tuner(
    call: ast.Call,
    given: dict[str, ast.expr],
    names: dict[str, ast.expr],
    items: dict[str, list[tuple[str, ast.expr]]],
    file: str,
) -> TunerCall:
    params: dict[str, Dim] = {}
    table = _resolve(given.get("params"), names)
    if isinstance(table, ast.Dict):
        for key, value in zip(table.keys, table.values, strict=False):
            first = _first(value, names, file)
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and first is not None:
                params[key.value] = Dim(key.value, first.value, first.where)
    target = given.get("params")
    if isinstance(target, ast.Name):  # tune_params = OrderedDict(); tune_params["block_size_x"] = [...]
        for name, assigned in items.get(target.id, []):
            first = _first(assigned, names, file)
            if first is not None:
                params.setdefault(name, Dim(name, first.value, first.where))
    arguments = _resolve(given.get("arguments"), names)
    args = tuple(
        _array_or_scalar(a, names, file)
        for a in (arguments.elts if isinstance(arguments, ast.List | ast.Tuple) else ())
    )
    grid_div: list[tuple[str, ...] | None] = []
    for axis in "xyz":
        div = _resolve(given.get(f"grid_div_{axis}"), names)
        if isinstance(div, ast.List | ast.Tuple):
            grid_div.append(
                tuple(e.value for e in div.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
            )
        else:
            grid_div.append(None)
    return TunerCall(
        f"{file}:{call.lineno}",
        _dims(given.get("problem_size"), names, file),
        tuple(params.values()),
        tuple(grid_div),
        args,
    )
