"""Launch sites read as text: host definitions, allocation counts and launch configurations."""

from __future__ import annotations

import re
from collections.abc import Mapping

from cudasrc import host
from cudasrc.dtypes import canonical_dtype, dtype_bytes
from cudasrc.specs.expressions import evaluate
from cudasrc.specs.grammar import _split_top
from sandbox.expr import FUNCTIONS, Number

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
        if word in defs and depth < 6 and word not in FUNCTIONS:
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
