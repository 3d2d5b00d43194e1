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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from sandbox.contract import ArgSpec, Check, Distribution, KernelSource, Launch, Problem, Status, Tolerance
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
# CUDA vector types: base name -> element type name
_VECTOR_BASES = {
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "int": "int32",
    "uint": "uint32",
    "char": "int8",
    "uchar": "uint8",
    "short": "int16",
    "ushort": "uint16",
    "long": "int64",
    "ulong": "uint64",
    "longlong": "int64",
    "ulonglong": "uint64",
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
    if base in _VECTOR_BASES and lanes in ("1", "2", "3", "4"):
        return ElemType(name, _VECTOR_BASES[base], int(lanes))
    raise ValueError(f"unsupported element type {name!r}")


def default_tolerance(dtype: str) -> Tolerance:
    """fp32/fp64 1e-5, fp16/bf16 1e-2, integers and bool exact."""
    scalar = elem_type(dtype).scalar
    if scalar in ("float16", "bfloat16"):
        return Tolerance(atol=1e-2, rtol=1e-2)
    if scalar in ("float32", "float64"):
        return Tolerance(atol=1e-5, rtol=1e-5)
    return Tolerance(atol=0.0, rtol=0.0)


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


@dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    first_bad_index: int = -1  # element index (vector types: index of the vector)
    detail: str = ""


def compare(ref_raw: np.ndarray, got_raw: np.ndarray, dtype: str, tol: Tolerance) -> Comparison:
    """Elementwise: |got - ref| <= atol + rtol * |ref|; NaN and ±Inf must sit in the same places."""
    et = elem_type(dtype)
    if np.array_equal(ref_raw, got_raw):  # identical bytes (the common case): nothing to measure
        return Comparison(True)
    ref, got = as_values(ref_raw, dtype), as_values(got_raw, dtype)
    if not et.is_float:
        bad = ref != got
        diff = np.abs(ref.astype(np.float64) - got.astype(np.float64))
        if not bad.any():
            return Comparison(True)
        first = int(np.argmax(bad))
        return Comparison(
            False,
            float(diff.max()),
            float((diff / np.maximum(np.abs(ref.astype(np.float64)), 1.0)).max()),
            first // et.lanes,
            f"expected {ref[first]}, got {got[first]}",
        )
    ref_nan, got_nan = np.isnan(ref), np.isnan(got)
    ref_inf, got_inf = np.isinf(ref), np.isinf(got)
    special_bad = (ref_nan != got_nan) | (ref_inf != got_inf) | (ref_inf & got_inf & (ref != got))
    finite = ~(ref_nan | got_nan | ref_inf | got_inf)
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(finite, np.abs(got - ref), 0.0)
        bad = special_bad | (finite & (diff > tol.atol + tol.rtol * np.abs(ref)))
        rel = np.where(finite, diff / np.maximum(np.abs(ref), np.finfo(np.float64).tiny), 0.0)
    max_abs = float(diff.max()) if diff.size else 0.0
    max_rel = float(rel.max()) if rel.size else 0.0
    if not bad.any():
        return Comparison(True, max_abs, max_rel)
    first = int(np.argmax(bad))
    return Comparison(
        False,
        max_abs,
        max_rel,
        first // et.lanes,
        f"expected {ref[first]:.7g}, got {got[first]:.7g} (atol={tol.atol:g}, rtol={tol.rtol:g})",
    )


def unwritten(run_a: np.ndarray, run_b: np.ndarray, itemsize: int) -> int:
    """First element index still holding ``POISON_A`` after run A and ``POISON_B`` after run B, or -1."""
    word = next(w for w in (8, 4, 2, 1) if itemsize % w == 0)  # compare whole words, not bytes
    n = run_a.size // itemsize
    mask: np.ndarray | None = None
    for run, poison in ((run_a, POISON_A), (run_b, POISON_B)):
        words = run[: n * itemsize].view(f"u{word}").reshape(n, itemsize // word)
        equal = words == np.frombuffer(bytes([poison]) * word, f"u{word}")[0]
        held = equal[:, 0] if equal.shape[1] == 1 else equal.all(axis=1)
        mask = held if mask is None else mask & held
    return int(np.argmax(mask)) if mask is not None and mask.any() else -1


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
    draws from its own stream (seed, position), so its data do not depend on the other arguments."""
    return {
        a.name: generate(a, np.random.default_rng([seed, k]))
        for k, a in enumerate(problem.args)
        if a.role in ("in", "inout")
    }


def constants_for(problem: Problem, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([seed, 7919])
    return {c.name: generate((c.dtype, c.count, c.dist), rng) for c in problem.constants}


def scalar_arg(arg: ArgSpec) -> np.generic:
    et = elem_type(arg.dtype)
    if et.lanes != 1:
        raise ValueError(f"scalar parameter {arg.name!r} of vector type {arg.dtype} is not supported")
    if et.scalar == "bfloat16":
        return bf16_from_f32(np.array([arg.value], dtype=np.float32))[0]
    return et.storage.type(arg.value)


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
        return [scalar_arg(a) if a.role == "scalar" else self.data(a.name) for a in self.problem.args]

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
    seed, on a plan of (problem, seeds) pairs. ``scribble(pattern)`` enqueues a kernel that fills
    every SM's shared memory. Host inputs and reference outputs are kept for the verifier's life,
    so a worker reuses one verifier for every batch of a run."""

    def __init__(
        self,
        rt: Runtime,
        plan: Sequence[tuple[Problem, Sequence[int]]],
        baseline: KernelHandle,
        tolerance: Tolerance | None,
        scribble: Callable[[int], None],
    ) -> None:
        self.rt = rt
        self.problems = tuple(problem for problem, _ in plan)
        self.seeds = tuple(tuple(seeds) for _, seeds in plan)
        self.baseline = baseline
        self.tolerance = tolerance
        self.scribble = scribble
        self._refs: dict[tuple[int, int], dict[str, np.ndarray]] = {}
        self._inputs: dict[tuple[int, int], dict[str, np.ndarray]] = {}

    def tol(self, dtype: str) -> Tolerance:
        return self.tolerance or default_tolerance(dtype)

    def inputs(self, index: int, seed: int) -> dict[str, np.ndarray]:
        """Host inputs of problem ``index`` under ``seed`` (drawn on first use)."""
        key = (index, seed)
        if key not in self._inputs:
            self._inputs[key] = inputs_for(self.problems[index], seed)
        return self._inputs[key]

    def run(
        self, kernel: KernelHandle, ws: Workspace, launch: Launch, index: int, seed: int, poison: int
    ) -> None:
        """One launch on fresh copies of the inputs (and ``__constant__`` data) drawn for ``seed``."""
        ws.prepare(self.inputs(index, seed), poison)
        for name, host in constants_for(ws.problem, seed).items():
            self.rt.htod(self.rt.global_symbol(kernel, name), host)
        self.scribble(poison)
        self.rt.launch(kernel, launch, ws.args())
        self.rt.synchronize()

    def reference(self, index: int, seed: int, ws: Workspace) -> dict[str, np.ndarray]:
        """The baseline's outputs for problem ``index`` under ``seed`` (computed on first use)."""
        key = (index, seed)
        if key not in self._refs:
            problem = self.problems[index]
            self.run(self.baseline, ws, problem.launch, index, seed, POISON_A)
            self._refs[key] = {a.name: ws.read(a.name) for a in problem.args if a.role in ("out", "inout")}
        return self._refs[key]

    def verify(self, kernel: KernelHandle, launches: Sequence[Launch] | None) -> Verdict:
        checks: list[Check] = []
        try:
            for index, problem in enumerate(self.problems):
                launch = launches[index] if launches else problem.launch
                ws = Workspace(self.rt, problem)
                try:
                    for seed in self.seeds[index]:
                        check = self._check(kernel, ws, index, seed, launch)
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

    def _check(self, kernel: KernelHandle, ws: Workspace, index: int, seed: int, launch: Launch) -> Check:
        problem = self.problems[index]
        ref = self.reference(index, seed, ws)
        inputs = self.inputs(index, seed)
        label = problem.label

        def fail(detail: str, arg: str = "", cmp: Comparison | None = None) -> Check:
            c = cmp or Comparison(False)
            return Check(label, seed, False, c.max_abs_err, c.max_rel_err, c.first_bad_index, arg, detail)

        self.run(kernel, ws, launch, index, seed, POISON_A)
        if name := ws.broken_guard():
            return fail(f"out-of-bounds write: the guard region around `{name}` was modified", name)
        for a in problem.args:
            if a.role == "in" and not np.array_equal(ws.read(a.name), inputs[a.name].view(np.uint8)):
                return fail(f"input `{a.name}` was modified", a.name)
        outs = [a for a in problem.args if a.role in ("out", "inout")]
        first = {a.name: ws.read(a.name) for a in outs}
        self.run(kernel, ws, launch, index, seed, POISON_B)
        for a in outs:
            second = ws.read(a.name)
            et = elem_type(a.dtype)
            if a.role == "out" and (idx := unwritten(first[a.name], second, et.itemsize)) >= 0:
                return fail(f"output `{a.name}` not written at index {idx}", a.name)
            again = compare(first[a.name], second, a.dtype, self.tol(a.dtype))
            if not again.ok:
                return fail(
                    f"nondeterministic: two runs on the same inputs differ: {again.detail}", a.name, again
                )
        worst = Comparison(True)
        for a in outs:
            cmp = compare(ref[a.name], first[a.name], a.dtype, self.tol(a.dtype))
            if not cmp.ok:
                return fail(
                    f"mismatch in `{a.name}` at index {cmp.first_bad_index}: {cmp.detail}", a.name, cmp
                )
            if cmp.max_abs_err >= worst.max_abs_err:
                worst = cmp
        return Check(label, seed, True, worst.max_abs_err, worst.max_rel_err)
