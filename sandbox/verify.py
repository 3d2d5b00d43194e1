"""Verification: does a candidate compute what the baseline computes, honestly?

Two halves:

- Pure numpy (runs anywhere, unit-tested on CPU): the tolerance model and its calibration,
  dtype-aware comparison with NaN/Inf positions, the "output not written" test on two
  differently poisoned runs.  Element types and input draws are :mod:`sandbox.draws`'s; which
  lower precisions a candidate uses, :mod:`sandbox.precision`'s.
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
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from sandbox import expr
from sandbox.contract import (
    ArgSpec,
    Check,
    KernelSource,
    Launch,
    Problem,
    Status,
    Tolerance,
)
from sandbox.draws import (
    Array,
    Stream,
    as_values,
    bf16_from_f32,
    constants_for,
    elem_type,
    f32_from_bf16,
    inputs_for,
    scalar_arg,
    to_host,
    xp_of,
)
from sandbox.runtime import CudaError, KernelArg, KernelHandle, MemoryCapExceeded, Runtime

GUARD_BYTES = 4096  # each side of every array; a multiple of 256 keeps data 256-byte aligned
GUARD = 0xA5
POISON_A = 0xFF  # float NaN, integer -1
POISON_B = 0x7F  # large finite float / large positive integer, different from A in every byte

# --------------------------------------------------------------------------- the tolerance model

UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
PERTURBATION = 2.0**-10  # relative size of the calibration run's input perturbation (at least)
K_ELEM = 8.0  # elementwise: multiples of the calibrated rounding scale
K_NORM = 8.0  # norm-wise: likewise, on the relative L2 error


def unit_roundoff(dtype: str) -> float:
    return UNIT_ROUNDOFF.get(elem_type(dtype).scalar, 0.0)


def perturbation(dtypes: Sequence[str]) -> float:
    """The relative perturbation of the calibration run: ``PERTURBATION``, or 4 units of roundoff
    of the coarsest float input (it must survive rounding to the input's storage)."""
    return max([PERTURBATION] + [4 * unit_roundoff(d) for d in dtypes])


def perturb(host: Array, dtype: str, rho: float, stream: Stream) -> Array:
    """``host`` (storage dtype, host or device array) with every nonzero finite float scaled by
    ``1 ± rho`` (the sign per element from the top bit of ``stream``'s draws); zeros, NaN/Inf
    and non-float arrays unchanged.  Computed in float32 for storage of at most 4 bytes
    (``1 ± rho`` is exact there; benchmark-sized inputs of 2^26 elements take a fraction of the
    time and memory of float64)."""
    et = elem_type(dtype)
    if not et.is_float:
        return host
    xp = xp_of(host)
    work = np.float64 if et.scalar == "float64" else np.float32
    values = f32_from_bf16(host) if et.scalar == "bfloat16" else host.astype(work, copy=False)
    up = (stream.bits(values.size, xp) >> xp.uint64(63)).astype(bool).reshape(values.shape)
    moved = values * xp.where(up, xp.asarray(1.0 + rho, dtype=work), xp.asarray(1.0 - rho, dtype=work))
    stored = bf16_from_f32(moved) if et.scalar == "bfloat16" else moved.astype(et.storage, copy=False)
    finite = xp.isfinite(values)
    if bool(finite.all()):  # zeros stay zeros under the scaling
        return stored
    return xp.where(finite, stored, host)


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

    def bounds(self, ref: Array, dtype: str) -> tuple[Array, float]:
        """(allowed |got - ref| per element, allowed relative L2 error; inf: not checked) for the
        baseline's values ``ref`` (float64, NaN/Inf zeroed; host or device array, and the
        bounds where ``ref`` lives)."""
        xp = xp_of(ref)
        o = self.override
        if o is not None and o.elementwise:
            elem = (o.atol or 0.0) + (o.rtol or 0.0) * xp.abs(ref)
            return elem, o.norm if o.norm is not None else np.inf
        u = max(unit_roundoff(dtype), self.allowed_roundoff if elem_type(dtype).is_float else 0.0)
        u *= math.sqrt(self.n)
        if u == 0.0:  # integers, bool: exact
            return xp.zeros_like(ref), o.norm if o is not None and o.norm is not None else np.inf
        sens = xp.zeros_like(ref)
        if self.perturbed is not None:
            perturbed = xp.asarray(self.perturbed)
            moved = as_values(perturbed.reshape(-1), dtype).astype(np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                sens = xp.abs(moved - ref) / self.rho
            sens = xp.where(xp.isfinite(sens), sens, np.inf)  # overflowed when perturbed: anything goes
        finite_sens = sens[xp.isfinite(sens)]
        sens_rms = _rms(finite_sens)
        scale = _rms(ref)
        elem = K_ELEM * u * (xp.maximum(sens, sens_rms) + xp.abs(ref) + scale)
        if o is not None and o.norm is not None:
            return elem, o.norm
        norm = K_NORM * u * max(sens_rms / scale, 1.0) if scale > 0 else np.inf
        return elem, norm


def _rms(x: Array) -> float:
    xp = xp_of(x)
    return float(xp.sqrt(xp.mean(xp.square(x)))) if x.size else 0.0


@dataclass(frozen=True)
class Agreement:
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
    ref_raw: Array,
    got_raw: Array,
    dtype: str,
    calib: Calibration,
    cared: Array | None = None,
) -> Agreement:
    """``got`` against the baseline's ``ref`` (raw bytes): NaN and ±Inf in the same places, every
    finite element within its bound, the relative L2 error within the norm bound, and signal where
    the baseline has some (a constant output where the baseline's varies is refused whatever the
    bounds).  ``cared``: which elements count (a bool per element; None: all), the others are
    don't-care; indices in the result are of the whole array.

    The arrays live on the host (numpy) or on the device (CuPy; ``ref`` and ``perturbed`` may be
    host arrays spilled there, and move to the device for the comparison): the same code computes
    the same verdict, first bad index and message on both, the device reading back only scalars
    and the few elements the message quotes."""
    xp = xp_of(got_raw)
    if xp is not np:
        ref_raw, cared = xp.asarray(ref_raw), None if cared is None else xp.asarray(cared)
    if cared is not None:
        size = elem_type(dtype).itemsize
        moved = None if calib.perturbed is None else pick(xp.asarray(calib.perturbed), cared, size)
        cmp = compare(
            pick(ref_raw, cared, size), pick(got_raw, cared, size), dtype, replace(calib, perturbed=moved)
        )
        if cmp.first_bad_index < 0:
            return cmp
        return replace(cmp, first_bad_index=int(xp.flatnonzero(cared)[cmp.first_bad_index]))
    et = elem_type(dtype)
    ref_raw, got_raw = ref_raw.reshape(-1), got_raw.reshape(-1)
    if bool(xp.array_equal(ref_raw, got_raw)):  # identical bytes (the common case): nothing to measure
        return Agreement(True, norm_bound=np.inf)
    override = calib.override
    if not et.is_float and (override is None or not override.elementwise):  # integers, bool: exact
        ref_i, got_i = as_values(ref_raw, dtype), as_values(got_raw, dtype)
        first = first_true(ref_i != got_i)
        diff_i = xp.abs(ref_i.astype(np.float64) - got_i.astype(np.float64))
        return Agreement(
            False,
            float(diff_i.max()),
            float((diff_i / xp.maximum(xp.abs(ref_i.astype(np.float64)), 1.0)).max()),
            first // et.lanes,
            f"expected {ref_i[first].item()}, got {got_i[first].item()} (integers must match exactly)",
            error_ratio=np.inf,
            norm_bound=np.inf,
        )
    ref, got = as_values(ref_raw, dtype).astype(np.float64), as_values(got_raw, dtype).astype(np.float64)
    ref_nan, got_nan = xp.isnan(ref), xp.isnan(got)
    ref_inf, got_inf = xp.isinf(ref), xp.isinf(got)
    special_bad = (ref_nan != got_nan) | (ref_inf != got_inf) | (ref_inf & got_inf & (ref != got))
    finite = ~(ref_nan | got_nan | ref_inf | got_inf)
    ref0, got0 = xp.where(finite, ref, 0.0), xp.where(finite, got, 0.0)
    elem, norm_bound = calib.bounds(ref0, dtype)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = xp.abs(got0 - ref0)
        ratio = xp.where(elem > 0, diff / xp.where(elem > 0, elem, 1.0), xp.where(diff > 0, np.inf, 0.0))
        rel = diff / xp.maximum(xp.abs(ref0), np.finfo(np.float64).tiny)
    ref_norm = float(xp.linalg.norm(ref0))
    norm_err = float(xp.linalg.norm(got0 - ref0)) / ref_norm if ref_norm > 0 else 0.0
    worst = int(xp.argmax(ratio)) if ratio.size else 0
    measured = Agreement(
        True,
        max_abs_err=float(diff.max()) if diff.size else 0.0,
        max_rel_err=float(rel.max()) if rel.size else 0.0,
        error_ratio=float(ratio[worst]) if ratio.size else 0.0,
        bound=float(elem[worst]) if elem.size else 0.0,
        norm_err=norm_err,
        norm_bound=float(norm_bound),
    )
    bad = special_bad | (diff > elem)
    if bool(bad.any()):
        first = first_true(bad)
        where = f"expected {float(ref[first]):.7g}, got {float(got[first]):.7g}"
        if bool(finite[first]):
            where += f" (error {float(diff[first]):.3g}, bound {float(elem[first]):.3g}: {calib_text(calib)})"
        return replace(measured, ok=False, first_bad_index=first // et.lanes, detail=where)
    if norm_err > norm_bound:
        why = f"relative L2 error {norm_err:.3g} exceeds its bound {norm_bound:.3g} ({calib_text(calib)})"
        return replace(measured, ok=False, detail=why)
    live, flat = ref0[finite], got0[finite]
    if live.size > 1:
        # + 0.0: -0.0 and 0.0 tie, and which one a reduction returns is its own business
        lo, hi, got_lo, got_hi = (float(v) + 0.0 for v in (live.min(), live.max(), flat.min(), flat.max()))
        if lo != hi and got_lo == got_hi:
            why = f"no signal: every element is {got_lo:.7g} where the baseline's range over [{lo:.7g}, {hi:.7g}]"
            return replace(measured, ok=False, detail=why)
    return measured


def first_true(mask: Array) -> int:
    """Index of the first true element (0 if none) of a contiguous bool array, by ``argmax`` over
    its bytes (0 or 1), which numpy and CuPy both reduce."""
    return int(xp_of(mask).argmax(mask.reshape(-1).view(np.uint8)))


def calib_text(calib: Calibration) -> str:
    if calib.override is not None and calib.override.elementwise:
        return calib.override.text()
    how = f"calibrated, n={calib.n}"
    if calib.allowed_roundoff:
        how += f", widened to an allowed precision's roundoff {calib.allowed_roundoff:.2g}"
    return how


def pick(raw: Array, cared: Array, itemsize: int) -> Array:
    """The raw bytes of the elements ``cared`` selects (a bool per element of ``itemsize`` bytes)."""
    return raw.reshape(-1)[: cared.size * itemsize].reshape(cared.size, itemsize)[cared].reshape(-1)


def unwritten_mask(run_a: Array, run_b: Array, itemsize: int) -> Array:
    """Per element: still holding ``POISON_A`` after run A and ``POISON_B`` after run B."""
    xp = xp_of(run_a, run_b)
    word = next(w for w in (8, 4, 2, 1) if itemsize % w == 0)  # compare whole words, not bytes
    n = run_a.size // itemsize
    mask = xp.ones(n, dtype=bool)
    for run, poison in ((run_a, POISON_A), (run_b, POISON_B)):
        words = run.reshape(-1)[: n * itemsize].view(f"u{word}").reshape(n, itemsize // word)
        equal = words == np.frombuffer(bytes([poison]) * word, f"u{word}")[0]
        mask &= equal[:, 0] if equal.shape[1] == 1 else equal.all(axis=1)
    return mask


def unwritten(run_a: Array, run_b: Array, itemsize: int, cared: Array | None = None) -> int:
    """First element index (among the ``cared`` ones; None: all) still holding ``POISON_A`` after
    run A and ``POISON_B`` after run B, or -1."""
    xp = xp_of(run_a, run_b)
    mask = unwritten_mask(run_a, run_b, itemsize)
    if cared is not None:
        mask &= xp.asarray(cared)
    return first_true(mask) if bool(mask.any()) else -1


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


PERTURB_STREAM = 104729  # the calibration's perturbation signs: (seed, PERTURB_STREAM + position)


# --------------------------------------------------------------------------- on the device


def upload(rt: Runtime, ptr: int, data: Array) -> None:
    """Copy ``data`` (a host array, or a device array: asynchronously) to device address ``ptr``."""
    if isinstance(data, np.ndarray):
        rt.htod(ptr, data)
    else:
        rt.copy_async(ptr, int(data.data.ptr), int(data.nbytes))


@dataclass
class Workspace:
    """Device buffers for one problem: each array framed by ``GUARD_BYTES`` on both sides."""

    rt: Runtime
    problem: Problem
    on_device: bool = False  # reads give device arrays (CuPy); else host copies
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

    def prepare(self, inputs: dict[str, Array], poison: int) -> None:
        """Guards filled, ``in``/``inout`` copied in (from the host, or from device arrays),
        ``out`` poisoned (synchronous)."""
        for a in self.problem.args:
            if a.role == "scalar":
                continue
            self.rt.memset_async(self.base[a.name], GUARD, self.nbytes[a.name] + 2 * GUARD_BYTES)
            if a.role == "out":
                self.rt.memset_async(self.data(a.name), poison, self.nbytes[a.name])
        for a in self.problem.args:
            if a.role in ("in", "inout"):
                upload(self.rt, self.data(a.name), inputs[a.name])
        self.rt.synchronize()

    def read(self, name: str) -> Array:
        """A copy of array ``name``: on the device when the workspace keeps its data there."""
        if self.on_device:
            return self.rt.device_view(self.data(name), self.nbytes[name]).copy()
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


DEVICE_MIN_BYTES = 1 << 20  # problems whose arrays hold fewer bytes are verified on the host
KEEP_FRACTION = 0.5  # share of the device's free memory that kept inputs and references may hold


def keep_on_device(held: int, nbytes: int, limit: int) -> bool:
    """Whether ``nbytes`` more fit the device memory set aside for kept data (``held`` in use,
    ``limit`` in all)."""
    return held + nbytes <= limit


class Verifier:
    """Verifies kernels against the baseline's outputs, which it computes once per problem and
    seed, on a plan of (problem, seeds) pairs, together with the baseline's outputs on perturbed
    inputs (the calibration of the tolerance model).  ``scribble(pattern)`` enqueues a kernel that
    fills every SM's shared memory; ``hold()`` is held around each stretch of GPU work (launches,
    device comparisons and the reads of their results), not around the host's comparisons (the
    worker's shared GPU lock, so another worker's timing waits only for GPU work).  Inputs and
    reference outputs are kept for the verifier's life, so a worker reuses one verifier for every
    batch of a run.

    Where the runtime has device arrays (``rt.array_module()``, CuPy) and ``device`` is true,
    everything stays on the device: inputs are drawn there (:class:`Stream`), references and
    candidates' outputs are read into device arrays and compared there (:func:`compare`), and
    only scalars and the elements a message quotes come back.  Kept inputs and references use at
    most ``keep_bytes`` of device memory (0: ``KEEP_FRACTION`` of what is free when the first is
    kept); what does not fit is kept on the host instead, and :attr:`spilled` says which."""

    def __init__(
        self,
        rt: Runtime,
        plan: Sequence[tuple[Problem, Sequence[int]]],
        baseline: KernelHandle,
        tolerances: Sequence[Tolerance],
        scribble: Callable[[int], None],
        hold: Callable[[], AbstractContextManager[object]] = nullcontext,
        device: bool = True,
        keep_bytes: int = 0,
        device_min_bytes: int = DEVICE_MIN_BYTES,
    ) -> None:
        self.rt = rt
        self.problems = tuple(problem for problem, _ in plan)
        self.seeds = tuple(tuple(seeds) for _, seeds in plan)
        self.baseline = baseline
        self.tolerances = tuple(tolerances)
        self.scribble = scribble
        self.hold = hold
        self.xp = rt.array_module() if device else None
        self.device_min_bytes = device_min_bytes
        self.keep_bytes = keep_bytes
        self.held = 0  # device bytes of kept inputs and references
        self.spilled: list[str] = []  # what was kept on the host for want of device memory
        self._refs: dict[tuple[int, int, int], dict[str, tuple[Array, Array | None]]] = {}
        self._cared: dict[tuple[int, int, int], dict[str, Array | None]] = {}
        self._inputs: dict[tuple[int, int], dict[str, Array]] = {}

    def device(self, index: int) -> Any:
        """The array module problem ``index`` is verified with on the device (CuPy), or None:
        on the host, where the runtime has no device arrays, or the problem's arrays are under
        ``DEVICE_MIN_BYTES`` (there a few dozen kernel launches per comparison cost more than
        numpy on a few thousand elements; the verdicts are the same either way; the
        ``device_min_bytes`` argument)."""
        problem = self.problems[index]
        size = sum(a.count * elem_type(a.dtype).itemsize for a in problem.args if a.role != "scalar")
        return self.xp if size >= self.device_min_bytes else None

    def workspace(self, index: int) -> Workspace:
        return Workspace(self.rt, self.problems[index], on_device=self.device(index) is not None)

    def keep(self, data: Array, what: str) -> Array:
        """``data`` kept for the verifier's life: on the device while it fits, else on the host."""
        if isinstance(data, np.ndarray):
            return data
        if not self.keep_bytes:
            self.keep_bytes = int(KEEP_FRACTION * self.rt.free_memory())
        if keep_on_device(self.held, int(data.nbytes), self.keep_bytes):
            self.held += int(data.nbytes)
            return data
        self.spilled.append(what)
        return to_host(data)

    def spill_note(self) -> str:
        """What was kept on the host, for a result's note ('' if nothing)."""
        if not self.spilled:
            return ""
        return (
            f"verification data kept on the host (over the {self.keep_bytes >> 20} MiB of device memory "
            f"set aside): {', '.join(self.spilled[:3])}{' ...' if len(self.spilled) > 3 else ''}"
        )

    def computing(self, index: int) -> AbstractContextManager[object]:
        """What problem ``index``'s comparisons run under: the GPU lock when on the device."""
        return self.hold() if self.device(index) is not None else nullcontext()

    def override(self, arg: str) -> Tolerance | None:
        """The spec's tolerance for output ``arg``: its own, else the one for every output."""
        return next((t for t in self.tolerances if t.arg == arg), None) or next(
            (t for t in self.tolerances if not t.arg), None
        )

    def inputs(self, index: int, seed: int) -> dict[str, Array]:
        """Inputs of problem ``index`` under ``seed`` (drawn on first use, on the device when
        the verifier works there)."""
        key = (index, seed)
        if key not in self._inputs:
            label = self.problems[index].label
            xp = self.device(index)
            if xp is None:
                self._inputs[key] = inputs_for(self.problems[index], seed)
            else:
                with self.hold():
                    drawn = inputs_for(self.problems[index], seed, xp)
                self._inputs[key] = {
                    n: self.keep(d, f"input `{n}` of {label}, seed {seed}") for n, d in drawn.items()
                }
        return self._inputs[key]

    def run(
        self,
        kernel: KernelHandle,
        ws: Workspace,
        launch: Launch,
        inputs: dict[str, Array],
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

    def calibrated(self, index: int, arg: str) -> bool:
        """Whether output ``arg``'s bound comes from the calibration run (a float output without
        an elementwise tolerance in the spec)."""
        dtype = next(a.dtype for a in self.problems[index].args if a.name == arg)
        override = self.override(arg)
        return elem_type(dtype).is_float and not (override is not None and override.elementwise)

    def reference(
        self, index: int, seed: int, ws: Workspace, const_seed: int | None = None
    ) -> dict[str, tuple[Array, Array | None]]:
        """The baseline's outputs for problem ``index`` under ``seed`` (``__constant__`` data drawn
        for ``const_seed``, by default ``seed``), and on the same inputs perturbed by :meth:`rho`
        (computed on first use; raw bytes per output; the perturbed run only when some output is
        :meth:`calibrated`, None for every output otherwise: at benchmark sizes it costs as much as
        the rest of the reference), and which elements of each output are compared (:meth:`cared`)."""
        const_seed = seed if const_seed is None else const_seed
        key = (index, seed, const_seed)
        if key not in self._refs:
            problem = self.problems[index]
            outs = [a.name for a in problem.args if a.role in ("out", "inout")]
            inputs = self.inputs(index, seed)
            consts = constants_for(problem, const_seed, self.inputs(index, const_seed))
            where = f"of {problem.label}, seed {seed}"
            with self.hold():
                self.run(self.baseline, ws, problem.launch, inputs, consts, POISON_A)
                ref = {name: self.keep(ws.read(name), f"reference `{name}` {where}") for name in outs}
            self._cared[key] = self._cared_elements(index, ws, inputs, consts, ref)
            if not any(self.calibrated(index, name) for name in outs):
                self._refs[key] = {name: (ref[name], None) for name in outs}
                return self._refs[key]
            rho = self.rho(index)
            dtypes = {a.name: a.dtype for a in problem.args} | {c.name: c.dtype for c in problem.constants}
            streams = {a.name: k for k, a in enumerate(problem.args)}
            streams |= {c.name: len(problem.args) + k for k, c in enumerate(problem.constants)}
            with self.hold():
                moved = {
                    name: perturb(data, dtypes[name], rho, Stream(seed, PERTURB_STREAM + streams[name]))
                    for name, data in inputs.items()
                }
                moved_consts = {
                    name: perturb(host, dtypes[name], rho, Stream(seed, PERTURB_STREAM + streams[name]))
                    for name, host in consts.items()
                }
                for c in problem.constants:  # a copy of an argument stays a copy of its perturbed data
                    if c.dist.kind == "copy":
                        moved_consts[c.name] = to_host(moved[c.dist.source]).copy()
                self.run(self.baseline, ws, problem.launch, moved, moved_consts, POISON_A)
                self._refs[key] = {
                    name: (ref[name], self.keep(ws.read(name), f"perturbed reference `{name}` {where}"))
                    for name in outs
                }
        return self._refs[key]

    def _cared_elements(
        self,
        index: int,
        ws: Workspace,
        inputs: dict[str, Array],
        consts: dict[str, np.ndarray],
        ref: dict[str, Array],
    ) -> dict[str, Array | None]:
        """Per output, the elements compared (None: all): its ``compare`` condition, or, for
        ``written``, the elements the baseline wrote (``ref``, poisoned with ``POISON_A``, and one
        more run on the same data poisoned with ``POISON_B``)."""
        problem = self.problems[index]
        outs = [a for a in problem.args if a.role in ("out", "inout")]
        cared: dict[str, Array | None] = {a.name: region_mask(a) for a in outs}
        xp = self.device(index)
        if xp is not None:
            cared = {name: None if m is None else xp.asarray(m) for name, m in cared.items()}
        written = [a for a in outs if a.compare is not None and a.compare.written]
        if written:
            with self.hold():
                self.run(self.baseline, ws, problem.launch, inputs, consts, POISON_B)
                again = {a.name: ws.read(a.name) for a in written}
                for a in written:
                    first = ref[a.name] if xp is None else xp.asarray(ref[a.name])
                    cared[a.name] = ~unwritten_mask(first, again[a.name], elem_type(a.dtype).itemsize)
        return cared

    def cared(self, index: int, seed: int, arg: str, const_seed: int | None = None) -> Array | None:
        """Which elements of output ``arg`` are compared for this reference (None: all);
        after :meth:`reference`."""
        return self._cared[(index, seed, seed if const_seed is None else const_seed)][arg]

    def calibration(self, index: int, arg: str, perturbed: Array | None, allowed: float) -> Calibration:
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
                ws = self.workspace(index)
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
        except Exception as exc:  # the device comparison's own allocations (CuPy's pool) ran out
            if self.xp is None or not isinstance(exc, self.xp.cuda.memory.OutOfMemoryError):
                raise
            return Verdict(Status.LAUNCH_ERROR, f"out of device memory while verifying: {exc}", tuple(checks))
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

        def fail(detail: str, arg: str = "", cmp: Agreement | None = None) -> Check:
            return checked(label, seed, False, detail, arg, cmp or Agreement(False))

        outs = [a for a in problem.args if a.role in ("out", "inout")]
        with self.hold():
            self.run(kernel, ws, launch, inputs, consts, POISON_A)
            broken = ws.broken_guard()
            read_back = {a.name: ws.read(a.name) for a in problem.args if a.role == "in"}
            first = {a.name: ws.read(a.name) for a in outs}
        if broken:
            return fail(f"out-of-bounds write: the guard region around `{broken}` was modified", broken)
        with self.computing(index):
            for name, got in read_back.items():
                if not same_bytes(got, inputs[name]):
                    return fail(f"input `{name}` was modified", name)
        with self.hold():
            self.run(kernel, ws, launch, inputs, consts, POISON_B)
            rerun = {a.name: ws.read(a.name) for a in outs}
        calib = {a.name: self.calibration(index, a.name, ref[a.name][1], allowed) for a in outs}
        with self.computing(index):
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
            worst: tuple[str, Agreement] = ("", Agreement(True, norm_bound=np.inf))
            for a in outs:
                cmp = compare(ref[a.name][0], first[a.name], a.dtype, calib[a.name], cared[a.name])
                if not cmp.ok:
                    where = f" at index {cmp.first_bad_index}" if cmp.first_bad_index >= 0 else ""
                    return fail(f"mismatch in `{a.name}`{where}: {cmp.detail}", a.name, cmp)
                if cmp.error_ratio >= worst[1].error_ratio:
                    worst = (a.name, cmp)
        return checked(label, seed, True, worst[1].measured() if worst[0] else "", worst[0], worst[1])


def same_bytes(got: Array, expected: Array) -> bool:
    """Whether two arrays hold the same bytes (on the device when ``got`` is there)."""
    xp = xp_of(got)
    return bool(xp.array_equal(got.reshape(-1), xp.asarray(expected).reshape(-1).view(np.uint8)))


def checked(label: str, seed: int, ok: bool, detail: str, arg: str, cmp: Agreement) -> Check:
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
