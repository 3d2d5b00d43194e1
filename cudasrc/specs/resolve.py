"""Resolution: a spec and its sizes into the contract's :class:`~sandbox.contract.Problem` values."""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping

from cudasrc.dtypes import dtype_bytes, is_float
from cudasrc.specs.expressions import CONSTANTS, _eval_int, _rename, evaluate
from cudasrc.specs.model import (
    ArraySpec,
    CompareSpec,
    DistSpec,
    InvalidSpec,
    KernelSpec,
    ScalarSpec,
    SpecError,
)
from sandbox.contract import (
    ArgSpec,
    ConstantInit,
    Distribution,
    Launch,
    Problem,
    Region,
)
from sandbox.expr import Number, expression_error

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
