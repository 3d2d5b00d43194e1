"""Element types and input draws: dtypes, seeded counter-based streams, a problem's inputs and constants.

Pure numpy (or CuPy: the same bits on the device).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from sandbox import expr, recorded
from sandbox.contract import (
    VECTOR_BASES,
    ArgSpec,
    Distribution,
    Problem,
)

Array = Any  # a numpy array on the host, a CuPy array on the device: the code below serves both

_SCALAR_TYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.uint16),  # numpy has no bfloat16: stored as its 16 bits
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16),
    "uint32": np.dtype(np.uint32),
    "uint64": np.dtype(np.uint64),
    "bool": np.dtype(np.bool_),
}


@dataclass(frozen=True)
class ElemType:
    """How one element of a kernel argument is stored: ``lanes`` scalars of ``scalar``."""

    name: str
    scalar: str
    lanes: int = 1

    @property
    def storage(self) -> np.dtype:
        return _SCALAR_TYPES[self.scalar]

    @property
    def itemsize(self) -> int:
        return self.storage.itemsize * self.lanes

    @property
    def is_float(self) -> bool:
        return self.scalar in ("float32", "float64", "float16", "bfloat16")


def elem_type(name: str) -> ElemType:
    """Parse a canonical dtype name (``float32``, ``bfloat16``, ``float4``, ``uint2``...)."""
    if name in _SCALAR_TYPES:
        return ElemType(name, name)
    base = name.rstrip("1234")
    lanes = name[len(base) :]
    if base in VECTOR_BASES and lanes in ("1", "2", "3", "4"):
        return ElemType(name, VECTOR_BASES[base], int(lanes))
    raise ValueError(f"unsupported element type {name!r}")


def xp_of(*arrays: Array) -> Any:
    """The array module of ``arrays``: numpy for host arrays, CuPy for device arrays (imported
    only when a device array is passed, so CPU-only processes never import it)."""
    if all(isinstance(a, np.ndarray | np.generic) or a is None for a in arrays):
        return np
    import cupy

    return cupy


def to_host(a: Array) -> np.ndarray:
    """A host copy of ``a`` (host arrays are returned as they are)."""
    return a if isinstance(a, np.ndarray) else a.get()


def bf16_from_f32(x: Array) -> Array:
    """Round-to-nearest-even float32 -> bfloat16 bits (uint16)."""
    xp = xp_of(x)
    bits = xp.ascontiguousarray(x, dtype=xp.float32).view(xp.uint32)
    rounded = bits + xp.uint32(0x7FFF) + ((bits >> xp.uint32(16)) & xp.uint32(1))
    out = (rounded >> xp.uint32(16)).astype(xp.uint16)
    return xp.where(xp.isnan(x), xp.uint16(0x7FC0), out)


def f32_from_bf16(bits: Array) -> Array:
    xp = xp_of(bits)
    return (bits.astype(xp.uint32) << xp.uint32(16)).view(xp.float32)


# --------------------------------------------------------------------------- random streams

_GOLDEN = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    """splitmix64's finalizer on a Python int (the stream key)."""
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


@dataclass(frozen=True)
class Stream:
    """Counter-based random numbers, defined by integer arithmetic alone so that numpy (the host)
    and CuPy (the device) draw the same bits: draw ``k`` of stream ``(seed, stream)`` is
    splitmix64's finalizer of ``key + (k + 1) * golden`` (mod 2^64), ``key`` a hash of the pair.
    Every distribution below is built from these bits with exactly rounded operations (integer
    sums, power-of-two scalings, one float multiply and one add), so inputs are bit-identical on
    every executor; the differential and pinning tests check it."""

    seed: int
    stream: int

    @property
    def key(self) -> int:
        return _mix64((_mix64(self.seed & _MASK64) + self.stream * _GOLDEN) & _MASK64)

    def bits(self, n: int, xp: Any = np, part: int = 0) -> Array:
        """``n`` uint64 draws (``part``: an independent block of the same stream)."""
        k = xp.arange(n, dtype=xp.uint64) + xp.uint64(part * n + 1)
        x = k * xp.uint64(_GOLDEN) + xp.uint64(self.key)
        x = (x ^ (x >> xp.uint64(30))) * xp.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> xp.uint64(27))) * xp.uint64(0x94D049BB133111EB)
        return x ^ (x >> xp.uint64(31))

    def uniform(self, n: int, dtype: Any, xp: Any = np) -> Array:
        """Uniform on [0, 1): 24 random bits for float32, 53 for float64 (exact conversions)."""
        if np.dtype(dtype) == np.float32:
            return (self.bits(n, xp) >> xp.uint64(40)).astype(xp.float32) * xp.float32(2.0**-24)
        return (self.bits(n, xp) >> xp.uint64(11)).astype(xp.float64) * xp.float64(2.0**-53)

    def normal(self, n: int, dtype: Any, xp: Any = np) -> Array:
        """Standard normal by Irwin-Hall: the centred sum of twelve 16-bit uniforms (an exact
        integer below 2^21) over 2^16, mean 0 and variance 1 - 2^-32, tails cut at ±6."""
        total = xp.zeros(n, dtype=xp.uint64)
        for part in range(3):
            x = self.bits(n, xp, part)
            for shift in (0, 16, 32, 48):
                total += (x >> xp.uint64(shift)) & xp.uint64(0xFFFF)
        centred = (total * xp.uint64(2)).astype(xp.int64) - xp.int64(12 * 65535)
        return centred.astype(dtype) * xp.asarray(2.0**-17, dtype=dtype)

    def integers(self, low: int, high: int, n: int, xp: Any = np) -> Array:
        """Integers in [low, high) (bias below 2^-40 for spans under 2^24)."""
        span = max(high - low, 1)
        return (self.bits(n, xp) % xp.uint64(span)).astype(xp.int64) + xp.int64(low)


def generate(arg: ArgSpec | tuple[str, int, Distribution], stream: Stream, xp: Any = np) -> Array:
    """Data for an array argument: ``count`` elements (times lanes), in storage dtype, drawn from
    ``stream`` with array module ``xp`` (numpy on the host, CuPy on the device: the same values)."""
    dtype, count, dist = (arg.dtype, arg.count, arg.dist) if isinstance(arg, ArgSpec) else arg
    et = elem_type(dtype)
    n = count * et.lanes
    # Draw in float32 when that is all the storage keeps: half the bytes and time of float64,
    # which matters at benchmark sizes (2^26 elements).
    work = xp.float32 if et.scalar in ("float32", "float16", "bfloat16") else xp.float64
    values: Array
    if dist.kind == "recorded":  # the program's own bytes, as it passed them
        raw = np.frombuffer(recorded.load(dist.source), dtype=np.uint8)
        if raw.size < n * et.storage.itemsize:
            raise ValueError(
                f"recorded input {dist.source[:12]} holds {raw.size} bytes, {n} elements need more"
            )
        return xp.asarray(raw[: n * et.storage.itemsize].view(et.storage).copy())
    if dist.kind == "const":
        values = xp.full(n, dist.value, dtype=work)
    elif dist.kind == "arange":
        values = xp.arange(n, dtype=xp.float64)
    elif dist.kind == "values":  # no randomness: evaluated on the host, the same everywhere
        values = xp.asarray(expr.values(dist.expr, n).astype(np.float64))
    elif dist.kind == "normal":  # mean and standard deviation from the interval [low, high]
        values = stream.normal(n, work, xp)
        values *= work(abs(dist.high - dist.low) / 2)
        values += work((dist.low + dist.high) / 2)
    elif dist.kind == "randint":
        values = stream.integers(int(dist.low), max(int(dist.high), int(dist.low) + 1), n, xp)
        values = values.astype(xp.float64)
    else:
        values = stream.uniform(n, work, xp)
        values *= work(dist.high - dist.low)
        values += work(dist.low)
    if et.scalar == "bfloat16":
        return bf16_from_f32(values.astype(xp.float32))
    if et.scalar == "bool":
        return values != 0
    if not et.is_float:
        info = np.iinfo(et.storage)
        values = xp.clip(xp.rint(values), float(info.min), float(info.max))
    return values.astype(et.storage)


def as_values(raw: Array, dtype: str) -> Array:
    """Raw bytes (uint8) of an array as numbers for comparison: floats as float64, ints as int/uint."""
    et = elem_type(dtype)
    typed = raw.view(et.storage)
    xp = xp_of(typed)
    if xp is not np and et.scalar in ("float32", "bfloat16"):  # CuPy compiles with -ftz=true
        bits = typed.astype(xp.uint32) << xp.uint32(16) if et.scalar == "bfloat16" else typed.view(xp.uint32)
        return f64_from_f32_bits(bits)
    if et.scalar == "bfloat16":
        return f32_from_bf16(typed).astype(np.float64)
    if et.is_float:
        return typed.astype(np.float64)
    return typed


def f64_from_f32_bits(bits: Array) -> Array:
    """float32 bit patterns (uint32) as float64 values, exactly, subnormals included, by integer
    and float64 operations only: CuPy's kernels flush float32 subnormals to zero (``-ftz=true``), so
    a plain ``astype`` on the device would call a subnormal output equal to zero where the host's
    comparison sees the difference."""
    xp = xp_of(bits)
    exponent = ((bits >> xp.uint32(23)) & xp.uint32(0xFF)).astype(xp.int32)
    mantissa = (bits & xp.uint32(0x7FFFFF)).astype(xp.float64)
    magnitude = xp.where(
        exponent == 0,
        xp.ldexp(mantissa, xp.int32(-149)),
        xp.ldexp(mantissa + 2.0**23, exponent - 150),
    )
    magnitude = xp.where(exponent == 255, xp.where(mantissa == 0, np.inf, np.nan), magnitude)
    return xp.where((bits >> xp.uint32(31)) != 0, -magnitude, magnitude)


def inputs_for(problem: Problem, seed: int, xp: Any = np) -> dict[str, Array]:
    """Fresh data for every ``in``/``inout`` array of ``problem`` under ``seed``, drawn with
    ``xp`` (numpy: on the host; CuPy: on the device, the same values); each argument draws from
    its own stream (seed, position), so its data do not depend on the other arguments; a ``copy``
    argument starts as a copy of its source's data."""
    data = {
        a.name: generate(a, Stream(seed, k), xp)
        for k, a in enumerate(problem.args)
        if a.role in ("in", "inout") and a.dist.kind != "copy"
    }
    for a in problem.args:
        if a.role in ("in", "inout") and a.dist.kind == "copy":
            if a.dist.source not in data:
                raise ValueError(f"{a.name}: copy({a.dist.source}) names no input array")
            data[a.name] = data[a.dist.source].copy()
    return data


CONST_STREAM = 7919  # constants draw from streams (seed, CONST_STREAM + position)


def constants_for(problem: Problem, seed: int, inputs: dict[str, Array]) -> dict[str, np.ndarray]:
    """Host ``__constant__`` data under ``seed``; a ``copy`` constant holds its argument's ``inputs``."""
    return {
        c.name: to_host(inputs[c.dist.source]).copy()
        if c.dist.kind == "copy"
        else generate((c.dtype, c.count, c.dist), Stream(seed, CONST_STREAM + k))
        for k, c in enumerate(problem.constants)
    }


def scalar_arg(arg: ArgSpec) -> np.generic:
    et = elem_type(arg.dtype)
    if et.lanes != 1:
        raise ValueError(f"scalar parameter {arg.name!r} of vector type {arg.dtype} is not supported")
    if et.scalar == "bfloat16":
        return bf16_from_f32(np.array([arg.value], dtype=np.float32))[0]
    return et.storage.type(arg.value)
