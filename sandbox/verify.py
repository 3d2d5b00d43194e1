"""Verification: does a candidate compute what the baseline computes, honestly?

Two halves:

- Pure numpy (runs anywhere, unit-tested on CPU): element types (fp16, bf16 stored as uint16,
  integers, CUDA vector types), input generation from a :class:`~sandbox.contract.Distribution`,
  default tolerances, dtype-aware comparison with NaN/Inf positions, the "output not written"
  test on two differently poisoned runs.
- On the device, through a :class:`~sandbox.runtime.Runtime`: :class:`Workspace` (one problem's
  buffers, each framed by guard regions) and :class:`Verifier`, which runs a candidate on every
  problem and seed and turns what it sees into a status.

The rules a candidate must pass, per problem size and seed (fresh inputs each time):

1. inputs are uploaded, outputs poisoned with ``POISON_A`` (NaN for floats, -1 for integers),
   guards filled with ``GUARD``, shared memory of every SM scribbled with a fresh pattern;
2. after the run, guards must be intact (else: out-of-bounds write) and every ``in`` argument
   must hash as uploaded (else: input modified);
3. the candidate runs again with ``POISON_B`` and a different scribble: elements still holding the
   poison of each run were never written; other differences beyond tolerance are nondeterminism
   (races, uninitialised shared memory or registers);
4. outputs must match the baseline's within tolerance, NaN/Inf in the same places.

Rules 1–3 give ``rejected``; rule 4 gives ``mismatch``.  Before any of this,
:func:`static_rejection` refuses kernels that would launch work from device code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace

import numpy as np

from sandbox import expr
from sandbox.contract import (
    VECTOR_BASES,
    ArgSpec,
    Check,
    Distribution,
    KernelSource,
    Launch,
    Problem,
    Status,
    Tolerance,
)
from sandbox.runtime import CudaError, KernelArg, KernelHandle, MemoryCapExceeded, Runtime

GUARD_BYTES = 4096  # each side of every array; a multiple of 256 keeps data 256-byte aligned
GUARD = 0xA5
POISON_A = 0xFF  # float NaN, integer -1
POISON_B = 0x7F  # large finite float / large positive integer, different from A in every byte

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


def bf16_from_f32(x: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 -> bfloat16 bits (uint16)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    out = (rounded >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    out[nan] = np.uint16(0x7FC0)
    return out


def f32_from_bf16(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def generate(arg: ArgSpec | tuple[str, int, Distribution], rng: np.random.Generator) -> np.ndarray:
    """Host data for an array argument: ``count`` elements (times lanes), in storage dtype."""
    dtype, count, dist = (arg.dtype, arg.count, arg.dist) if isinstance(arg, ArgSpec) else arg
    et = elem_type(dtype)
    n = count * et.lanes
    # Draw in float32 when that is all the storage keeps: half the bytes and time of float64,
    # which matters at benchmark sizes (2^26 elements).
    work = np.float32 if et.scalar in ("float32", "float16", "bfloat16") else np.float64
    values: np.ndarray
    if dist.kind == "const":
        values = np.full(n, dist.value, dtype=work)
    elif dist.kind == "arange":
        values = np.arange(n, dtype=np.float64)
    elif dist.kind == "values":
        values = expr.values(dist.expr, n).astype(np.float64)
    elif dist.kind == "normal":  # mean and standard deviation from the interval [low, high]
        values = rng.standard_normal(n, dtype=work)
        values *= work(abs(dist.high - dist.low) / 2)
        values += work((dist.low + dist.high) / 2)
    elif dist.kind == "randint":
        values = rng.integers(int(dist.low), max(int(dist.high), int(dist.low) + 1), n).astype(np.float64)
    else:
        values = rng.random(n, dtype=work)
        values *= work(dist.high - dist.low)
        values += work(dist.low)
    if et.scalar == "bfloat16":
        return bf16_from_f32(values.astype(np.float32))
    if et.scalar == "bool":
        return values != 0
    if not et.is_float:
        info = np.iinfo(et.storage)
        values = np.clip(np.rint(values), info.min, info.max)
    return values.astype(et.storage)


def as_values(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Raw bytes (uint8) of an array as numbers for comparison: floats as float64, ints as int/uint."""
    et = elem_type(dtype)
    typed = raw.view(et.storage)
    if et.scalar == "bfloat16":
        return f32_from_bf16(typed).astype(np.float64)
    if et.is_float:
        return typed.astype(np.float64)
    return typed


# --------------------------------------------------------------------------- the tolerance model

UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
# the unit roundoff a candidate's bound is widened to when the spec allows that precision
PRECISION_ROUNDOFF = {
    "tf32": 2.0**-11,
    "fp16": 2.0**-11,
    "bf16": 2.0**-8,
    "mma": 2.0**-8,
    "fast-math": 2.0**-18,
}
PERTURBATION = 2.0**-10  # relative size of the calibration run's input perturbation (at least)
K_ELEM = 8.0  # elementwise: multiples of the calibrated rounding scale
K_NORM = 8.0  # norm-wise: likewise, on the relative L2 error


def unit_roundoff(dtype: str) -> float:
    return UNIT_ROUNDOFF.get(elem_type(dtype).scalar, 0.0)


def perturbation(dtypes: Sequence[str]) -> float:
    """The relative perturbation of the calibration run: ``PERTURBATION``, or 4 units of roundoff
    of the coarsest float input (it must survive rounding to the input's storage)."""
    return max([PERTURBATION] + [4 * unit_roundoff(d) for d in dtypes])


def perturb(host: np.ndarray, dtype: str, rho: float, rng: np.random.Generator) -> np.ndarray:
    """``host`` (storage dtype) with every nonzero finite float scaled by ``1 ± rho`` (random
    sign per element); zeros, NaN/Inf and non-float arrays unchanged.  Works in float32 for
    storage types no wider (one rounding, as in float64: the product of a float32 and ``1 ± rho``
    is exact in float64) and draws the signs as bits: at benchmark sizes (2^26 elements) this runs
    in a fraction of a second where float64 with integer signs took seconds."""
    et = elem_type(dtype)
    if not et.is_float:
        return host
    values = f32_from_bf16(host) if et.scalar == "bfloat16" else host
    work = np.float64 if values.dtype == np.float64 else np.float32
    bits = np.frombuffer(rng.bytes((values.size + 7) // 8), dtype=np.uint8)
    up = np.unpackbits(bits, count=values.size).astype(bool).reshape(values.shape)
    factor = np.where(up, work(1.0 + rho), work(1.0 - rho))
    moved = values.astype(work, copy=False) * factor
    stored = bf16_from_f32(moved) if et.scalar == "bfloat16" else moved.astype(et.storage, copy=False)
    keep = ~np.isfinite(values) | (values == 0)
    return np.where(keep, host, stored)


def reduction_length(problem: Problem) -> int:
    """How many terms an output element may sum, as far as the problem shows: input elements per
    output element, flops per output element (``work flops=``, two per term), and, for problems
    with several size variables, the largest of them (a row, a column, an inner dimension)."""

    def elements(roles: tuple[str, ...]) -> int:
        return sum(a.count * elem_type(a.dtype).lanes for a in problem.args if a.role in roles)

    outs = max(elements(("out", "inout")), 1)
    ins = elements(("in", "inout")) + sum(c.count for c in problem.constants)
    n = max(ins / outs, problem.flops / (2 * outs))
    if len(problem.sizes) > 1:
        n = max(n, *problem.sizes.values())
    return max(1, round(n))


@dataclass(frozen=True)
class Calibration:
    """What an output's bound is derived from: the baseline's outputs on inputs perturbed by
    ``rho`` (raw bytes; None: not measured), the reduction length ``n``, an override, and the
    unit roundoff of a lower precision the spec allows the candidate (0: none)."""

    perturbed: np.ndarray | None = None
    rho: float = PERTURBATION
    n: int = 1
    override: Tolerance | None = None
    allowed_roundoff: float = 0.0

    def bounds(self, ref: np.ndarray, dtype: str) -> tuple[np.ndarray, float]:
        """(allowed |got - ref| per element, allowed relative L2 error; inf: not checked) for the
        baseline's values ``ref`` (float64, NaN/Inf zeroed)."""
        o = self.override
        if o is not None and o.elementwise:
            elem = (o.atol or 0.0) + (o.rtol or 0.0) * np.abs(ref)
            return elem, o.norm if o.norm is not None else np.inf
        u = max(unit_roundoff(dtype), self.allowed_roundoff if elem_type(dtype).is_float else 0.0)
        u *= math.sqrt(self.n)
        if u == 0.0:  # integers, bool: exact
            return np.zeros_like(ref), o.norm if o is not None and o.norm is not None else np.inf
        sens = np.zeros_like(ref)
        if self.perturbed is not None:
            moved = as_values(self.perturbed.reshape(-1), dtype).astype(np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                sens = np.abs(moved - ref) / self.rho
            sens = np.where(np.isfinite(sens), sens, np.inf)  # overflowed when perturbed: anything goes
        finite_sens = sens[np.isfinite(sens)]
        sens_rms = _rms(finite_sens)
        scale = _rms(ref)
        elem = K_ELEM * u * (np.maximum(sens, sens_rms) + np.abs(ref) + scale)
        if o is not None and o.norm is not None:
            return elem, o.norm
        norm = K_NORM * u * max(sens_rms / scale, 1.0) if scale > 0 else np.inf
        return elem, norm


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x)))) if x.size else 0.0


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    first_bad_index: int = -1  # element index (vector types: index of the vector)
    detail: str = ""
    error_ratio: float = 0.0  # max |got - ref| / bound over the elements
    bound: float = 0.0  # the bound at that element
    norm_err: float = 0.0
    norm_bound: float = 0.0

    def measured(self) -> str:
        """The measured errors next to their bounds, for a verdict's message."""
        text = (
            f"max error {self.error_ratio:.2g} of its bound ({self.max_abs_err:.3g} against {self.bound:.3g})"
        )
        if math.isfinite(self.norm_bound):
            text += f"; relative L2 error {self.norm_err:.3g} against {self.norm_bound:.3g}"
        return text


def compare(
    ref_raw: np.ndarray,
    got_raw: np.ndarray,
    dtype: str,
    calib: Calibration,
    cared: np.ndarray | None = None,
) -> Comparison:
    """``got`` against the baseline's ``ref`` (raw bytes): NaN and ±Inf in the same places, every
    finite element within its bound, the relative L2 error within the norm bound, and signal where
    the baseline has some (a constant output where the baseline's varies is refused whatever the
    bounds).  ``cared``: which elements count (a bool per element; None: all), the others are
    don't-care; indices in the result are of the whole array."""
    if cared is not None:
        size = elem_type(dtype).itemsize
        moved = None if calib.perturbed is None else pick(calib.perturbed, cared, size)
        cmp = compare(
            pick(ref_raw, cared, size), pick(got_raw, cared, size), dtype, replace(calib, perturbed=moved)
        )
        if cmp.first_bad_index < 0:
            return cmp
        return replace(cmp, first_bad_index=int(np.flatnonzero(cared)[cmp.first_bad_index]))
    et = elem_type(dtype)
    ref_raw, got_raw = ref_raw.reshape(-1), got_raw.reshape(-1)
    if np.array_equal(ref_raw, got_raw):  # identical bytes (the common case): nothing to measure
        return Comparison(True, norm_bound=np.inf)
    override = calib.override
    if not et.is_float and (override is None or not override.elementwise):  # integers, bool: exact
        ref_i, got_i = as_values(ref_raw, dtype), as_values(got_raw, dtype)
        first = int(np.argmax(ref_i != got_i))
        diff_i = np.abs(ref_i.astype(np.float64) - got_i.astype(np.float64))
        return Comparison(
            False,
            float(diff_i.max()),
            float((diff_i / np.maximum(np.abs(ref_i.astype(np.float64)), 1.0)).max()),
            first // et.lanes,
            f"expected {ref_i[first]}, got {got_i[first]} (integers must match exactly)",
            error_ratio=np.inf,
            norm_bound=np.inf,
        )
    ref, got = as_values(ref_raw, dtype).astype(np.float64), as_values(got_raw, dtype).astype(np.float64)
    ref_nan, got_nan = np.isnan(ref), np.isnan(got)
    ref_inf, got_inf = np.isinf(ref), np.isinf(got)
    special_bad = (ref_nan != got_nan) | (ref_inf != got_inf) | (ref_inf & got_inf & (ref != got))
    finite = ~(ref_nan | got_nan | ref_inf | got_inf)
    ref0, got0 = np.where(finite, ref, 0.0), np.where(finite, got, 0.0)
    elem, norm_bound = calib.bounds(ref0, dtype)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.abs(got0 - ref0)
        ratio = np.where(elem > 0, diff / np.where(elem > 0, elem, 1.0), np.where(diff > 0, np.inf, 0.0))
        rel = diff / np.maximum(np.abs(ref0), np.finfo(np.float64).tiny)
    ref_norm = float(np.linalg.norm(ref0))
    norm_err = float(np.linalg.norm(got0 - ref0)) / ref_norm if ref_norm > 0 else 0.0
    worst = int(np.argmax(ratio)) if ratio.size else 0
    measured = Comparison(
        True,
        max_abs_err=float(diff.max()) if diff.size else 0.0,
        max_rel_err=float(rel.max()) if rel.size else 0.0,
        error_ratio=float(ratio[worst]) if ratio.size else 0.0,
        bound=float(elem[worst]) if elem.size else 0.0,
        norm_err=norm_err,
        norm_bound=float(norm_bound),
    )
    bad = special_bad | (diff > elem)
    if bad.any():
        first = int(np.argmax(bad))
        where = f"expected {ref[first]:.7g}, got {got[first]:.7g}"
        if finite[first]:
            where += f" (error {diff[first]:.3g}, bound {elem[first]:.3g}: {calib_text(calib)})"
        return replace(measured, ok=False, first_bad_index=first // et.lanes, detail=where)
    if norm_err > norm_bound:
        why = f"relative L2 error {norm_err:.3g} exceeds its bound {norm_bound:.3g} ({calib_text(calib)})"
        return replace(measured, ok=False, detail=why)
    live = ref0[finite]
    if live.size > 1 and live.min() != live.max() and got0[finite].min() == got0[finite].max():
        why = (
            f"no signal: every element is {got0[finite][0]:.7g} where the baseline's range over "
            f"[{live.min():.7g}, {live.max():.7g}]"
        )
        return replace(measured, ok=False, detail=why)
    return measured


def calib_text(calib: Calibration) -> str:
    if calib.override is not None and calib.override.elementwise:
        return calib.override.text()
    how = f"calibrated, n={calib.n}"
    if calib.allowed_roundoff:
        how += f", widened to an allowed precision's roundoff {calib.allowed_roundoff:.2g}"
    return how


def pick(raw: np.ndarray, cared: np.ndarray, itemsize: int) -> np.ndarray:
    """The raw bytes of the elements ``cared`` selects (a bool per element of ``itemsize`` bytes)."""
    return raw.reshape(-1)[: cared.size * itemsize].reshape(cared.size, itemsize)[cared].reshape(-1)


def unwritten_mask(run_a: np.ndarray, run_b: np.ndarray, itemsize: int) -> np.ndarray:
    """Per element: still holding ``POISON_A`` after run A and ``POISON_B`` after run B."""
    word = next(w for w in (8, 4, 2, 1) if itemsize % w == 0)  # compare whole words, not bytes
    n = run_a.size // itemsize
    mask = np.ones(n, dtype=bool)
    for run, poison in ((run_a, POISON_A), (run_b, POISON_B)):
        words = run.reshape(-1)[: n * itemsize].view(f"u{word}").reshape(n, itemsize // word)
        equal = words == np.frombuffer(bytes([poison]) * word, f"u{word}")[0]
        mask &= equal[:, 0] if equal.shape[1] == 1 else equal.all(axis=1)
    return mask


def unwritten(run_a: np.ndarray, run_b: np.ndarray, itemsize: int, cared: np.ndarray | None = None) -> int:
    """First element index (among the ``cared`` ones; None: all) still holding ``POISON_A`` after
    run A and ``POISON_B`` after run B, or -1."""
    mask = unwritten_mask(run_a, run_b, itemsize)
    if cared is not None:
        mask &= cared
    return int(np.argmax(mask)) if mask.any() else -1


def region_mask(arg: ArgSpec) -> np.ndarray | None:
    """The elements of output ``arg`` its ``compare`` condition selects (None: no condition)."""
    region = arg.compare
    if region is None or not region.where:
        return None
    return expr.mask(region.where, region.index, region.shape)


# Symbols of the CUDA device runtime: present only when device code launches kernels or streams.
DEVICE_RUNTIME_SYMBOLS = (b"cudaLaunchDevice", b"cudaGetParameterBuffer", b"cudaStreamCreateWithFlags")
SEPARATE_COMPILATION_OPTIONS = ("-rdc", "--relocatable-device-code", "-dc", "--device-c", "-dlto")


def static_rejection(kernel: KernelSource, cubin: bytes) -> str:
    """Why a compiled kernel is rejected before it runs, or ''.

    Work launched from device code (dynamic parallelism, device-side streams, fire-and-forget or
    tail launches) would escape the timed region and the verification's view; it needs separate
    compilation and the device runtime, whose symbols then appear in the cubin."""
    for opt in kernel.options:
        if opt.split("=")[0] in SEPARATE_COMPILATION_OPTIONS:
            return f"option {opt} (separate compilation / dynamic parallelism) is not allowed"
    for sym in DEVICE_RUNTIME_SYMBOLS:
        if sym in cubin:
            return f"launches work from device code ({sym.decode()}): dynamic parallelism is not allowed"
    return ""


def inputs_for(problem: Problem, seed: int) -> dict[str, np.ndarray]:
    """Fresh host data for every ``in``/``inout`` array of ``problem`` under ``seed``; each argument
    draws from its own stream (seed, position), so its data do not depend on the other arguments;
    a ``copy`` argument starts as a copy of its source's data."""
    data = {
        a.name: generate(a, np.random.default_rng([seed, k]))
        for k, a in enumerate(problem.args)
        if a.role in ("in", "inout") and a.dist.kind != "copy"
    }
    for a in problem.args:
        if a.role in ("in", "inout") and a.dist.kind == "copy":
            if a.dist.source not in data:
                raise ValueError(f"{a.name}: copy({a.dist.source}) names no input array")
            data[a.name] = data[a.dist.source].copy()
    return data


def constants_for(problem: Problem, seed: int, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``__constant__`` data under ``seed``; a ``copy`` constant holds its argument's ``inputs``."""
    rng = np.random.default_rng([seed, 7919])
    return {
        c.name: inputs[c.dist.source].copy()
        if c.dist.kind == "copy"
        else generate((c.dtype, c.count, c.dist), rng)
        for c in problem.constants
    }


def scalar_arg(arg: ArgSpec) -> np.generic:
    et = elem_type(arg.dtype)
    if et.lanes != 1:
        raise ValueError(f"scalar parameter {arg.name!r} of vector type {arg.dtype} is not supported")
    if et.scalar == "bfloat16":
        return bf16_from_f32(np.array([arg.value], dtype=np.float32))[0]
    return et.storage.type(arg.value)


# --------------------------------------------------------------------------- precision

# Identifiers of the CUDA headers that compute in a lower precision than fp32 (``half``/``half2``
# alone are left out: they are common variable names).
_PRECISION_NAMES = {
    "fp16": {
        "__half",
        "__half2",
        "__float2half",
        "__float2half_rn",
        "__float2half_rz",
        "__half2float",
        "__floats2half2_rn",
        "__float22half2_rn",
        "__hadd",
        "__hmul",
        "__hfma",
        "__hadd2",
        "__hmul2",
        "__hfma2",
        "__hsub",
        "__hdiv",
        "hexp",
        "h2exp",
    },
    "bf16": {
        "__nv_bfloat16",
        "__nv_bfloat162",
        "nv_bfloat16",
        "__float2bfloat16",
        "__float2bfloat16_rn",
        "__bfloat162float",
        "__floats2bfloat162_rn",
    },
    "tf32": {"tf32", "__float_to_tf32"},
    "mma": {"wmma", "mma_sync", "load_matrix_sync", "store_matrix_sync"},
    "fast-math": {
        "__expf",
        "__exp10f",
        "__logf",
        "__log2f",
        "__log10f",
        "__sinf",
        "__cosf",
        "__tanf",
        "__sincosf",
        "__powf",
        "__tanhf",
        "__fdividef",
    },
}
_FAST_MATH_OPTIONS = (
    "--use_fast_math",
    "-use_fast_math",
    "--prec-div=false",
    "--prec-sqrt=false",
    "-prec-div=false",
    "-prec-sqrt=false",
)
_APPROX_OPS = ("ex2", "lg2", "sin", "cos", "tanh", "rcp", "div", "sqrt")  # PTX ``op.approx``: fast math
_TOKEN = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"|[A-Za-z_]\w*', re.S)


def precision_features(kernel: KernelSource) -> dict[str, str]:
    """Lower-precision arithmetic a translation unit uses, kind (``PRECISIONS``) -> the first
    evidence: header identifiers, inline PTX in string literals (``mma``/``wgmma``, ``tf32``,
    conversions to f16/bf16, ``.approx`` math) and fast-math compiler options."""
    found: dict[str, str] = {}
    for opt in kernel.options:
        if opt in _FAST_MATH_OPTIONS:
            found.setdefault("fast-math", opt)
    for m in _TOKEN.finditer(kernel.source):
        tok = m.group()
        if tok.startswith(("//", "/*")):
            continue
        if tok.startswith('"'):
            for op in re.findall(r"[a-z][a-z0-9_.]*", tok):
                parts = op.split(".")
                if parts[0] in ("mma", "wgmma"):
                    found.setdefault("mma", op)
                if "tf32" in parts:
                    found.setdefault("tf32", op)
                if parts[0] == "cvt" and ("f16" in parts or "f16x2" in parts):
                    found.setdefault("fp16", op)
                if parts[0] == "cvt" and ("bf16" in parts or "bf16x2" in parts):
                    found.setdefault("bf16", op)
                if "approx" in parts and parts[0] in _APPROX_OPS:
                    found.setdefault("fast-math", op)
            continue
        for kind, names in _PRECISION_NAMES.items():
            if tok in names:
                found.setdefault(kind, tok)
    return found


def lower_precision(baseline: KernelSource, candidate: KernelSource) -> dict[str, str]:
    """The lower-precision features the candidate uses and the baseline does not."""
    base = precision_features(baseline)
    return {k: v for k, v in precision_features(candidate).items() if k not in base}


def allowed_roundoff(features: dict[str, str], allowed: Sequence[str]) -> float:
    """The unit roundoff a candidate's bounds widen to: that of its coarsest lower precision when
    the spec allows every one it uses, else 0 (the baseline's own bound)."""
    if not features or any(k not in allowed for k in features):
        return 0.0
    return max(PRECISION_ROUNDOFF[k] for k in features)


# --------------------------------------------------------------------------- on the device


@dataclass
class Workspace:
    """Device buffers for one problem: each array framed by ``GUARD_BYTES`` on both sides."""

    rt: Runtime
    problem: Problem
    base: dict[str, int] = field(default_factory=dict)
    nbytes: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for a in self.problem.args:
            if a.role == "scalar":
                continue
            size = a.count * elem_type(a.dtype).itemsize
            self.nbytes[a.name] = size
            self.base[a.name] = self.rt.alloc(size + 2 * GUARD_BYTES)

    def data(self, name: str) -> int:
        return self.base[name] + GUARD_BYTES

    def args(self) -> list[KernelArg]:
        """The kernel's arguments: scalars, and pointers ``offset`` elements into their arrays."""
        return [
            scalar_arg(a)
            if a.role == "scalar"
            else self.data(a.name) + a.offset * elem_type(a.dtype).itemsize
            for a in self.problem.args
        ]

    def prepare(self, inputs: dict[str, np.ndarray], poison: int) -> None:
        """Guards filled, ``in``/``inout`` uploaded, ``out`` poisoned (synchronous)."""
        for a in self.problem.args:
            if a.role == "scalar":
                continue
            self.rt.memset_async(self.base[a.name], GUARD, self.nbytes[a.name] + 2 * GUARD_BYTES)
            if a.role == "out":
                self.rt.memset_async(self.data(a.name), poison, self.nbytes[a.name])
        self.rt.synchronize()
        for a in self.problem.args:
            if a.role in ("in", "inout"):
                self.rt.htod(self.data(a.name), inputs[a.name])

    def read(self, name: str) -> np.ndarray:
        return self.rt.dtoh(self.data(name), self.nbytes[name])

    def broken_guard(self) -> str:
        """Name of the first array whose guard regions changed, or ''."""
        for name, size in self.nbytes.items():
            before = self.rt.dtoh(self.base[name], GUARD_BYTES)
            after = self.rt.dtoh(self.data(name) + size, GUARD_BYTES)
            if (before != GUARD).any() or (after != GUARD).any():
                return name
        return ""

    def close(self) -> None:
        for ptr in self.base.values():
            self.rt.free(ptr)
        self.base.clear()


@dataclass(frozen=True)
class Verdict:
    """Outcome of verifying one kernel: ``status`` None means every check passed."""

    status: Status | None
    message: str = ""
    checks: tuple[Check, ...] = ()


class Verifier:
    """Verifies kernels against the baseline's outputs, which it computes once per problem and
    seed, on a plan of (problem, seeds) pairs, together with the baseline's outputs on perturbed
    inputs (the calibration of the tolerance model).  ``scribble(pattern)`` enqueues a kernel that
    fills every SM's shared memory; ``hold()`` is held around each stretch of GPU work (launches and
    the reads of their results), not around the host's comparisons (the worker's shared GPU lock, so
    another worker's timing waits only for GPU work).  Host inputs and reference outputs are kept
    for the verifier's life, so a worker reuses one verifier for every batch of a run."""

    def __init__(
        self,
        rt: Runtime,
        plan: Sequence[tuple[Problem, Sequence[int]]],
        baseline: KernelHandle,
        tolerances: Sequence[Tolerance],
        scribble: Callable[[int], None],
        hold: Callable[[], AbstractContextManager[object]] = nullcontext,
    ) -> None:
        self.rt = rt
        self.problems = tuple(problem for problem, _ in plan)
        self.seeds = tuple(tuple(seeds) for _, seeds in plan)
        self.baseline = baseline
        self.tolerances = tuple(tolerances)
        self.scribble = scribble
        self.hold = hold
        self._refs: dict[tuple[int, int, int], dict[str, tuple[np.ndarray, np.ndarray]]] = {}
        self._cared: dict[tuple[int, int, int], dict[str, np.ndarray | None]] = {}
        self._inputs: dict[tuple[int, int], dict[str, np.ndarray]] = {}

    def override(self, arg: str) -> Tolerance | None:
        """The spec's tolerance for output ``arg``: its own, else the one for every output."""
        return next((t for t in self.tolerances if t.arg == arg), None) or next(
            (t for t in self.tolerances if not t.arg), None
        )

    def inputs(self, index: int, seed: int) -> dict[str, np.ndarray]:
        """Host inputs of problem ``index`` under ``seed`` (drawn on first use)."""
        key = (index, seed)
        if key not in self._inputs:
            self._inputs[key] = inputs_for(self.problems[index], seed)
        return self._inputs[key]

    def run(
        self,
        kernel: KernelHandle,
        ws: Workspace,
        launch: Launch,
        inputs: dict[str, np.ndarray],
        constants: dict[str, np.ndarray],
        poison: int,
    ) -> None:
        """One launch on fresh copies of ``inputs`` and ``__constant__`` data."""
        ws.prepare(inputs, poison)
        for name, host in constants.items():
            self.rt.htod(self.rt.global_symbol(kernel, name), host)
        self.scribble(poison)
        self.rt.launch(kernel, launch, ws.args())
        self.rt.synchronize()

    def rho(self, index: int) -> float:
        problem = self.problems[index]
        floats = [a.dtype for a in problem.args if a.role in ("in", "inout") and elem_type(a.dtype).is_float]
        return perturbation(floats + [c.dtype for c in problem.constants if elem_type(c.dtype).is_float])

    def reference(
        self, index: int, seed: int, ws: Workspace, const_seed: int | None = None
    ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The baseline's outputs for problem ``index`` under ``seed`` (``__constant__`` data drawn
        for ``const_seed``, by default ``seed``), and on the same inputs perturbed by :meth:`rho`
        (computed on first use; raw bytes per output), and which elements of each output are
        compared (:meth:`cared`)."""
        const_seed = seed if const_seed is None else const_seed
        key = (index, seed, const_seed)
        if key not in self._refs:
            problem = self.problems[index]
            outs = [a.name for a in problem.args if a.role in ("out", "inout")]
            inputs = self.inputs(index, seed)
            consts = constants_for(problem, const_seed, self.inputs(index, const_seed))
            with self.hold():
                self.run(self.baseline, ws, problem.launch, inputs, consts, POISON_A)
                ref = {name: ws.read(name) for name in outs}
            self._cared[key] = self._cared_elements(index, ws, inputs, consts, ref)
            rng, rho = np.random.default_rng([seed, 104729]), self.rho(index)
            dtypes = {a.name: a.dtype for a in problem.args} | {c.name: c.dtype for c in problem.constants}
            moved = {name: perturb(host, dtypes[name], rho, rng) for name, host in inputs.items()}
            moved_consts = {name: perturb(host, dtypes[name], rho, rng) for name, host in consts.items()}
            for c in problem.constants:  # a copy of an argument stays a copy of its perturbed data
                if c.dist.kind == "copy":
                    moved_consts[c.name] = moved[c.dist.source].copy()
            with self.hold():
                self.run(self.baseline, ws, problem.launch, moved, moved_consts, POISON_A)
                self._refs[key] = {name: (ref[name], ws.read(name)) for name in outs}
        return self._refs[key]

    def _cared_elements(
        self,
        index: int,
        ws: Workspace,
        inputs: dict[str, np.ndarray],
        consts: dict[str, np.ndarray],
        ref: dict[str, np.ndarray],
    ) -> dict[str, np.ndarray | None]:
        """Per output, the elements compared (None: all): its ``compare`` condition, or, for
        ``written``, the elements the baseline wrote (``ref``, poisoned with ``POISON_A``, and one
        more run on the same data poisoned with ``POISON_B``)."""
        problem = self.problems[index]
        outs = [a for a in problem.args if a.role in ("out", "inout")]
        cared = {a.name: region_mask(a) for a in outs}
        written = [a for a in outs if a.compare is not None and a.compare.written]
        if written:
            with self.hold():
                self.run(self.baseline, ws, problem.launch, inputs, consts, POISON_B)
                again = {a.name: ws.read(a.name) for a in written}
            for a in written:
                cared[a.name] = ~unwritten_mask(ref[a.name], again[a.name], elem_type(a.dtype).itemsize)
        return cared

    def cared(self, index: int, seed: int, arg: str, const_seed: int | None = None) -> np.ndarray | None:
        """Which elements of output ``arg`` are compared for this reference (None: all);
        after :meth:`reference`."""
        return self._cared[(index, seed, seed if const_seed is None else const_seed)][arg]

    def calibration(self, index: int, arg: str, perturbed: np.ndarray, allowed: float) -> Calibration:
        problem = self.problems[index]
        return Calibration(perturbed, self.rho(index), reduction_length(problem), self.override(arg), allowed)

    def verify(
        self, kernel: KernelHandle, launches: Sequence[Launch] | None, allowed_roundoff: float = 0.0
    ) -> Verdict:
        """Every check of the module docstring; ``allowed_roundoff``: the unit roundoff of a lower
        precision the spec allows this kernel (0: none)."""
        checks: list[Check] = []
        try:
            for index, problem in enumerate(self.problems):
                launch = launches[index] if launches else problem.launch
                ws = Workspace(self.rt, problem)
                try:
                    for seed in self.seeds[index]:
                        check = self._check(kernel, ws, index, seed, launch, allowed_roundoff)
                        checks.append(check)
                        if not check.ok:
                            status = (
                                Status.MISMATCH if check.detail.startswith("mismatch") else Status.REJECTED
                            )
                            return Verdict(
                                status, f"{problem.label}, seed {seed}: {check.detail}", tuple(checks)
                            )
                finally:
                    ws.close()
        except MemoryCapExceeded as exc:
            return Verdict(Status.LAUNCH_ERROR, str(exc), tuple(checks))
        except CudaError as exc:
            if exc.sticky:  # the context is gone: the worker reports a crash and restarts
                raise
            return Verdict(Status.LAUNCH_ERROR, str(exc), tuple(checks))
        return Verdict(None, "", tuple(checks))

    def _check(
        self, kernel: KernelHandle, ws: Workspace, index: int, seed: int, launch: Launch, allowed: float
    ) -> Check:
        problem = self.problems[index]
        ref = self.reference(index, seed, ws)
        inputs = self.inputs(index, seed)
        consts = constants_for(problem, seed, inputs)
        cared = {name: self.cared(index, seed, name) for name in ref}
        label = problem.label

        def fail(detail: str, arg: str = "", cmp: Comparison | None = None) -> Check:
            return checked(label, seed, False, detail, arg, cmp or Comparison(False))

        outs = [a for a in problem.args if a.role in ("out", "inout")]
        with self.hold():
            self.run(kernel, ws, launch, inputs, consts, POISON_A)
            broken = ws.broken_guard()
            read_back = {a.name: ws.read(a.name) for a in problem.args if a.role == "in"}
            first = {a.name: ws.read(a.name) for a in outs}
        if broken:
            return fail(f"out-of-bounds write: the guard region around `{broken}` was modified", broken)
        for name, got in read_back.items():
            if not np.array_equal(got, inputs[name].view(np.uint8)):
                return fail(f"input `{name}` was modified", name)
        with self.hold():
            self.run(kernel, ws, launch, inputs, consts, POISON_B)
            rerun = {a.name: ws.read(a.name) for a in outs}
        calib = {a.name: self.calibration(index, a.name, ref[a.name][1], allowed) for a in outs}
        for a in outs:
            second = rerun[a.name]
            et = elem_type(a.dtype)
            idx = unwritten(first[a.name], second, et.itemsize, cared[a.name])
            if a.role == "out" and idx >= 0:
                return fail(f"output `{a.name}` not written at index {idx}", a.name)
            again = compare(first[a.name], second, a.dtype, calib[a.name], cared[a.name])
            if not again.ok:
                return fail(
                    f"nondeterministic: two runs on the same inputs differ: {again.detail}", a.name, again
                )
        worst: tuple[str, Comparison] = ("", Comparison(True, norm_bound=np.inf))
        for a in outs:
            cmp = compare(ref[a.name][0], first[a.name], a.dtype, calib[a.name], cared[a.name])
            if not cmp.ok:
                where = f" at index {cmp.first_bad_index}" if cmp.first_bad_index >= 0 else ""
                return fail(f"mismatch in `{a.name}`{where}: {cmp.detail}", a.name, cmp)
            if cmp.error_ratio >= worst[1].error_ratio:
                worst = (a.name, cmp)
        return checked(label, seed, True, worst[1].measured() if worst[0] else "", worst[0], worst[1])


def checked(label: str, seed: int, ok: bool, detail: str, arg: str, cmp: Comparison) -> Check:
    """A :class:`~sandbox.contract.Check` carrying a comparison's measured errors and bounds."""

    def finite(x: float) -> float:  # results are JSON: an exact bound's ratio is capped, "unchecked" is 0
        return min(x, 1e300) if math.isfinite(x) or x > 0 else 0.0

    return Check(
        label,
        seed,
        ok,
        cmp.max_abs_err,
        cmp.max_rel_err,
        cmp.first_bad_index,
        arg,
        detail,
        error_ratio=finite(cmp.error_ratio),
        bound=cmp.bound,
        norm_err=cmp.norm_err,
        norm_bound=cmp.norm_bound if math.isfinite(cmp.norm_bound) else 0.0,
    )
