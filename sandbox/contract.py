"""The evaluation contract: what crosses from the optimizer to a GPU worker and back.

Every type here is a frozen dataclass of plain values (str, int, float, bool, tuples,
dicts, enums, other contract types), so it serialises to JSON with :func:`to_json` and
back with :func:`from_json` unchanged.  The same types travel to a local worker process
(over a private pipe), to a remote ``cuda-agent worker`` (over HTTP) and to a Ray task.

This module must stay importable with nothing but the standard library, numpy-free:
no CuPy, no CUDA, no agent or server imports.

Verdicts are values: a candidate that fails to compile, crashes or mismatches comes back
as a :class:`CandidateResult` with a :class:`Status` and a message, never as an exception.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, TypeVar

import cattrs
import cattrs.v

SCHEMA_VERSION = 1

Role = Literal["in", "out", "inout", "scalar"]
DistKind = Literal["uniform", "normal", "randint", "const", "arange"]


class Status(str, Enum):
    """Outcome of evaluating one candidate."""

    OK = "ok"  # compiled, verified on every size and seed, timed
    COMPILE_ERROR = "compile_error"
    LAUNCH_ERROR = "launch_error"  # bad launch configuration, too many resources, missing symbol
    CRASH = "crash"  # sticky CUDA error (illegal address, ...) or the worker died
    TIMEOUT = "timeout"  # killed at its deadline
    MISMATCH = "mismatch"  # outputs differ from the baseline beyond tolerance
    REJECTED = "rejected"  # broke a rule: wrote an input, out of bounds, side stream, nondeterminism...
    CANCELLED = "cancelled"  # the caller cancelled before this candidate finished


# --------------------------------------------------------------------------- request


@dataclass(frozen=True)
class Distribution:
    """How to draw an input array. ``uniform``/``normal`` for floats, ``randint`` for integers
    (``low`` inclusive, ``high`` exclusive), ``const`` fills with ``value``, ``arange`` 0..n-1."""

    kind: DistKind = "uniform"
    low: float = -1.0
    high: float = 1.0
    value: float = 0.0


@dataclass(frozen=True)
class ArgSpec:
    """One kernel parameter, resolved to a concrete size.

    ``dtype`` is a canonical element type name: float32, float64, float16, bfloat16, int8..int64,
    uint8..uint64, bool, or a CUDA vector type (float2, float4, int4, uint4, ...).
    Arrays have ``role`` in/out/inout and ``count`` elements; scalars have ``role == "scalar"``
    and a ``value``.
    """

    name: str
    role: Role
    dtype: str
    count: int = 0
    dist: Distribution = field(default_factory=Distribution)
    value: float = 0.0


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0


@dataclass(frozen=True)
class ConstantInit:
    """Initial contents of a ``__constant__`` (or ``__device__``) symbol before each run."""

    name: str
    dtype: str
    count: int
    dist: Distribution = field(default_factory=Distribution)


@dataclass(frozen=True)
class Problem:
    """One concrete problem size: arguments, the baseline's launch, and the work it represents."""

    label: str  # e.g. "n=4097"
    sizes: dict[str, int]
    args: tuple[ArgSpec, ...]
    launch: Launch
    constants: tuple[ConstantInit, ...] = ()
    bytes_moved: int = 0  # minimum bytes the kernel must move (for GB/s and % of peak)
    flops: int = 0


@dataclass(frozen=True)
class Tolerance:
    """An override of the calibrated tolerance model (README "Tolerance model").

    ``atol``/``rtol`` (either given): elementwise ``|got - ref| <= atol + rtol * |ref|`` replaces
    the calibrated elementwise bound; ``norm``: the relative L2 error ``||got - ref|| / ||ref||``
    must not exceed it.  A key left ``None`` keeps its default: the calibrated elementwise bound
    when neither ``atol`` nor ``rtol`` is given; the calibrated norm bound unless the elementwise
    bound is overridden (then no norm bound unless ``norm`` is given).  ``arg``: the output it
    applies to ("" for every output)."""

    atol: float | None = None
    rtol: float | None = None
    norm: float | None = None
    arg: str = ""

    @property
    def elementwise(self) -> bool:
        return self.atol is not None or self.rtol is not None

    def text(self) -> str:
        keys = (("atol", self.atol), ("rtol", self.rtol), ("norm", self.norm))
        body = " ".join(f"{k}={v:g}" for k, v in keys if v is not None)
        return (f"arg={self.arg} " if self.arg else "") + (body or "calibrated")


@dataclass(frozen=True)
class KernelSource:
    """A standalone translation unit and the kernel to launch from it.

    ``name`` is the kernel's name expression: ``vadd`` or, for a template, ``vadd<float, 256>``.
    """

    source: str
    name: str
    options: tuple[str, ...] = ()  # extra NVRTC options: -I, -D, -std=...
    filename: str = "kernel.cu"


@dataclass(frozen=True)
class Candidate:
    """A proposed rewrite. ``launches`` (one per problem: verify problems, then the bench problem)
    replaces the baseline's launch configuration when the rewrite changes it."""

    id: str
    kernel: KernelSource
    launches: tuple[Launch, ...] | None = None


@dataclass(frozen=True)
class Budget:
    timeout_s: float = 30.0  # per candidate, compile + verify + time
    time_budget_ms: float = 400.0  # wall-clock budget of the sampling loop per candidate
    min_samples: int = 10
    max_samples: int = 200
    target_rel_spread: float = 0.01  # stop when IQR / median falls below this
    gpu_memory_bytes: int = 4 << 30  # cap on the memory one evaluation may allocate


PRECISIONS = ("tf32", "fp16", "bf16", "mma", "fast-math")  # what ``precision allow=`` may name


@dataclass(frozen=True)
class EvalOptions:
    arch: str = ""  # e.g. "sm_90"; empty: the device's own
    backend: Literal["cupy", "pycuda"] = "cupy"
    sanitize: bool = False  # run compute-sanitizer memcheck + racecheck on OK candidates
    time: bool = True  # False: verify only (faster; used by tools that just check)


@dataclass(frozen=True)
class EvalRequest:
    id: str
    baseline: KernelSource
    candidates: tuple[Candidate, ...]
    verify_problems: tuple[Problem, ...]
    bench_problem: Problem
    seeds: tuple[int, ...] = (1, 2, 3)
    tolerance: Tolerance | None = None  # None: the calibrated model for every output
    tolerances: tuple[Tolerance, ...] = ()  # per output (``arg`` set); before ``tolerance``
    allow_precision: tuple[str, ...] = ()  # lower precisions a candidate may use (PRECISIONS)
    budget: Budget = field(default_factory=Budget)
    options: EvalOptions = field(default_factory=EvalOptions)
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.seeds:  # no seed: no verification at all, and a timing of unchecked kernels
            raise ValueError("an evaluation needs at least one seed")


# --------------------------------------------------------------------------- compile


@dataclass(frozen=True)
class Diagnostic:
    """A compiler message at a line (1-based) of the compiled translation unit."""

    line: int
    column: int
    severity: Literal["error", "warning", "note"]
    message: str
    file: str = ""


@dataclass(frozen=True)
class Resources:
    """Per-kernel resource usage from ptxas."""

    registers: int = 0
    spill_stores: int = 0  # bytes
    spill_loads: int = 0  # bytes
    shared_bytes: int = 0  # static shared memory
    stack_bytes: int = 0
    constant_bytes: int = 0


@dataclass(frozen=True)
class CompileResult:
    ok: bool
    log: str
    diagnostics: tuple[Diagnostic, ...] = ()
    resources: dict[str, Resources] = field(default_factory=dict)  # mangled or plain kernel name
    lowered_names: dict[str, str] = field(default_factory=dict)  # name expression -> mangled name
    seconds: float = 0.0
    cached: bool = False

    def first_error(self) -> str:
        """What a failed compile says first (``line 12: identifier "x" is undefined``)."""
        first = next((d for d in self.diagnostics if d.severity == "error"), None)
        return f"line {first.line}: {first.message}" if first else "compilation failed"


# --------------------------------------------------------------------------- result


@dataclass(frozen=True)
class Check:
    """Verification of one problem size under one seed."""

    label: str
    seed: int
    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    first_bad_index: int = -1
    arg: str = ""  # the output argument that failed, or the one closest to its bound
    detail: str = ""
    error_ratio: float = 0.0  # max over elements of |got - ref| / bound (<= 1 passes)
    bound: float = 0.0  # the elementwise bound at that element
    norm_err: float = 0.0  # relative L2 error ||got - ref|| / ||ref||
    norm_bound: float = 0.0  # its bound (inf: not checked)


@dataclass(frozen=True)
class Timing:
    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    samples: int
    rel_spread: float  # (q3 - q1) / median
    throttled: bool = False  # SM clock dropped during sampling
    modes: tuple[float, ...] = ()  # the centres of the modes when the samples are multimodal


@dataclass(frozen=True)
class CandidateResult:
    candidate_id: str
    status: Status
    message: str = ""
    compile_log: str = ""
    checks: tuple[Check, ...] = ()
    timing: Timing | None = None
    baseline_timing: Timing | None = None  # the baseline, interleaved with this candidate
    speedup: float = 0.0  # median over pairs of baseline time / candidate time (same buffers)
    speedup_low: float = 0.0  # first quartile of those paired ratios (pessimistic)
    speedup_high: float = 0.0  # third quartile (optimistic)
    pairs: int = 0  # paired samples behind the speedup
    precision: str = ""  # lower precision than the baseline, as detected in the source: what
    note: str = ""  # what the numbers need said with them (multimodal samples, ...)
    resources: Resources | None = None
    achieved_gbps: float = 0.0
    achieved_gflops: float = 0.0
    pct_peak_bandwidth: float = 0.0
    pct_peak_flops: float = 0.0
    sanitizer: str = ""  # compute-sanitizer summary, when it ran
    seconds: float = 0.0  # wall time spent on this candidate


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    compute_capability: str  # e.g. "9.0"
    sm_count: int
    l2_bytes: int
    memory_bytes: int
    driver: str = ""
    peak_bandwidth_gbps: float = 0.0  # measured device-to-device copy (read + write)
    peak_gflops: float = 0.0  # measured large fp32 GEMM
    peak_tensor_gflops: float = 0.0  # measured large fp16 GEMM (tensor cores)
    index: int = 0


@dataclass(frozen=True)
class EvalResult:
    request_id: str
    baseline: CandidateResult  # the baseline verified against itself and timed alone
    candidates: tuple[CandidateResult, ...]
    device: DeviceInfo | None = None
    schema_version: int = SCHEMA_VERSION


@dataclass(frozen=True)
class Progress:
    """Streamed while an evaluation runs."""

    request_id: str
    done: int
    total: int
    message: str = ""


# --------------------------------------------------------------------------- JSON

_converter = cattrs.Converter()
T = TypeVar("T")


def to_dict(obj: Any) -> Any:
    return _converter.unstructure(obj)


def from_dict(cls: type[T], data: Any) -> T:
    if isinstance(data, dict) and "schema_version" in data and data["schema_version"] != SCHEMA_VERSION:
        raise ContractError(
            f"schema version {data['schema_version']} is not supported (this build speaks {SCHEMA_VERSION})"
        )
    try:
        return _converter.structure(data, cls)
    except Exception as exc:  # cattrs raises ClassValidationError / KeyError / TypeError
        raise ContractError(f"malformed {cls.__name__}: {_flatten(exc)}") from exc


def to_json(obj: Any) -> str:
    return json.dumps(to_dict(obj), separators=(",", ":"))


def from_json(cls: type[T], text: str | bytes) -> T:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ContractError(f"not JSON: {exc}") from exc
    return from_dict(cls, data)


def _flatten(exc: BaseException) -> str:
    if isinstance(exc, cattrs.BaseValidationError):
        return "; ".join(cattrs.transform_error(exc, format_exception=_explain))
    return str(exc)


def _explain(exc: BaseException, cls: type | None) -> str:
    if type(exc) is ValueError and cls is None:  # a dataclass's own check (``__post_init__``): its words
        return str(exc)
    return cattrs.v.format_exception(exc, cls)


class ContractError(ValueError):
    """A message that does not match the contract (wrong shape, wrong version)."""
