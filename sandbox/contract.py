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
import math
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, TypeVar

import cattrs
import cattrs.v

from base.errors import InputError
from sandbox import recorded
from sandbox.expr import MATH_CONSTANTS, expression_error

SCHEMA_VERSION = 1

Role = Literal["in", "out", "inout", "scalar"]
DistKind = Literal["uniform", "normal", "randint", "const", "arange", "copy", "values", "recorded"]
Backend = Literal["cupy", "pycuda"]

# Element types a request may name: scalar name -> bytes, and CUDA vector bases (``float4``...)
# -> their scalar; a vector type is a base followed by 1-4 lanes.
SCALAR_BYTES = {
    "float32": 4,
    "float64": 8,
    "float16": 2,
    "bfloat16": 2,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "bool": 1,
}
VECTOR_BASES = {
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


def element_bytes(dtype: str) -> int | None:
    """Bytes of one element of the canonical type ``dtype``; None for a name that is not one."""
    if dtype in SCALAR_BYTES:
        return SCALAR_BYTES[dtype]
    base = dtype.rstrip("1234")
    lanes = dtype[len(base) :]
    if base in VECTOR_BASES and lanes in ("1", "2", "3", "4"):
        return SCALAR_BYTES[VECTOR_BASES[base]] * int(lanes)
    return None


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
    # verified, but timed faster than the device's measured ceilings allow for the problem's work
    # (``sandbox.timing.implausible``): work escaped the timed region, or the timing is gamed
    IMPLAUSIBLE = "implausible"


# --------------------------------------------------------------------------- request


@dataclass(frozen=True)
class Distribution:
    """How to draw an input array. ``uniform``/``normal`` for floats, ``randint`` for integers
    (``low`` inclusive, ``high`` exclusive), ``const`` fills with ``value``, ``arange`` 0..n-1,
    ``copy`` starts as the data of the argument named ``source`` (same type and count),
    ``values`` computes each scalar from its index ``i`` by the element expression ``expr``
    (``i % 16``, ``cos(2 * M_PI * i / 1024)``; sizes already substituted), ``recorded`` holds the
    bytes a program passed (:mod:`sandbox.recorded`: ``source`` is their SHA-256; every seed
    gets the same data)."""

    kind: DistKind = "uniform"
    low: float = -1.0
    high: float = 1.0
    value: float = 0.0
    source: str = ""
    expr: str = ""


@dataclass(frozen=True)
class Region:
    """The elements of an output that verification compares; the others are don't-care (never
    compared, never required to be written).  Either ``where``: a condition over ``index``, one
    name per dimension of the output seen as a row-major array of ``shape`` (an element
    expression, sizes already substituted: ``j <= i`` over ``shape=(T, T)``); or ``written``: the
    elements the baseline writes."""

    shape: tuple[int, ...] = ()
    index: tuple[str, ...] = ()
    where: str = ""
    written: bool = False


@dataclass(frozen=True)
class ArgSpec:
    """One kernel parameter, resolved to a concrete size.

    ``dtype`` is a canonical element type name: float32, float64, float16, bfloat16, int8..int64,
    uint8..uint64, bool, or a CUDA vector type (float2, float4, int4, uint4, ...).
    Arrays have ``role`` in/out/inout and ``count`` elements; scalars have ``role == "scalar"``
    and a ``value``.  ``offset``: the kernel gets a pointer that many elements into the array
    (a stencil's ``buffer + padding``; the whole array is filled, poisoned and compared);
    ``compare``: an output's cared-for elements (None: all of them).
    """

    name: str
    role: Role
    dtype: str
    count: int = 0
    dist: Distribution = field(default_factory=Distribution)
    value: float = 0.0
    offset: int = 0
    compare: Region | None = None


@dataclass(frozen=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0


# a ``__constant__``'s name as C++ names it: ``filter``, ``ns::filter``, ``mask<float>``
CONSTANT_NAME = re.compile(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*(<[\w:<>, ]*>)?")


@dataclass(frozen=True)
class ConstantInit:
    """Initial contents of a ``__constant__`` (or ``__device__``) symbol before each run; a
    ``copy`` distribution names the input array argument whose data it holds (same type and count).
    ``name`` is a name expression (:data:`CONSTANT_NAME`): in a namespace or a variable template
    (``ns::filter``, ``mask<float>``) the symbol is the name NVRTC lowers it to."""

    name: str
    dtype: str
    count: int
    dist: Distribution = field(default_factory=Distribution)


def lowered_constants(problems: tuple[Problem, ...]) -> dict[str, str]:
    """The ``__constant__`` names of ``problems`` whose symbol NVRTC must lower (qualified or
    templated names), each with the name expression to compile it with (``&mask<float>``)."""
    names = (c.name for p in problems for c in p.constants)
    return {n: f"&{n}" for n in dict.fromkeys(names) if not n.isidentifier()}


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
    # macros the kernel is compiled with for this problem (``-DNAME=VALUE``): compile-time sizes
    defines: dict[str, int] = field(default_factory=dict)
    # whether times implying more than the device's ceilings for this work are refused
    # (``work floor=off`` in the spec: the counts overstate the traffic)
    work_floor: bool = True

    def array_bytes(self) -> int:
        """Bytes of every array argument (scalars left out)."""
        return sum(a.count * (element_bytes(a.dtype) or 0) for a in self.args if a.role != "scalar")


@dataclass(frozen=True)
class Tolerance:
    """An override of the calibrated tolerance model (docs/guide/verification.md, "Tolerance model").

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
    ``headers``: the unit's own headers (name as included -> text), handed to NVRTC in memory;
    a compile for a request reads no other file than CUDA's headers (``sandbox.boundary``).
    """

    source: str
    name: str
    options: tuple[str, ...] = ()  # extra NVRTC options: -D, -std=... (sandbox.boundary.check_options)
    filename: str = "kernel.cu"  # a plain file name
    headers: dict[str, str] = field(default_factory=dict)


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


# an evaluation holds a problem's arrays this many times over: the original's outputs, a
# candidate's, and rotated input sets for timing (the memory cap must cover that)
MEMORY_COPIES = 3


PRECISIONS = ("tf32", "fp16", "bf16", "mma", "fast-math")  # what ``precision allow=`` may name


@dataclass(frozen=True)
class EvalOptions:
    arch: str = ""  # e.g. "sm_90"; empty: the device's own
    backend: Backend = "cupy"
    sanitize: bool = False  # run compute-sanitizer memcheck + racecheck on OK candidates
    time: bool = True  # False: verify only (faster; used by tools that just check)
    profile: bool = False  # profile OK candidates once under Nsight Compute (``CandidateResult.profile``)


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
class Stall:
    """One warp stall reason: average warps stalled for it per issued instruction."""

    reason: str  # e.g. "long_scoreboard"
    per_issue: float


@dataclass(frozen=True)
class Profile:
    """Nsight Compute's view of one launch of a candidate at the bench problem (``ncu
    --clock-control none``), or why there is none (``available`` False: no ``ncu`` on the GPU
    machine, no permission for the counters, the run failed).  Percentages are of the device's peak."""

    available: bool
    message: str = ""  # why not available; or what ncu said beside the metrics
    memory_pct: float = 0.0  # memory throughput (the busiest of DRAM, L2, L1) % of peak
    dram_pct: float = 0.0
    compute_pct: float = 0.0  # SM throughput % of peak
    achieved_occupancy_pct: float = 0.0
    l2_hit_pct: float = 0.0
    duration_us: float = 0.0
    stalls: tuple[Stall, ...] = ()  # the top stall reasons, largest first
    theoretical_occupancy_pct: float = 0.0  # what the launch's resources allow
    occupancy_limiter: str = ""  # what caps the blocks per SM: registers, shared memory, warps, blocks
    dram_bytes: float = 0.0  # read + written to DRAM by the launch
    l2_bytes: float = 0.0  # L2 traffic (all requests) of the launch


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
    profile: Profile | None = None  # Nsight Compute metrics, when ``EvalOptions.profile`` asked
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
    simulated: bool = False  # sandbox.testing's simulated GPU: its numbers are made up, not measured


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


# --------------------------------------------------------------------------- PyTorch tasks


@dataclass(frozen=True)
class TorchCandidate:
    """A KernelBench-format answer: Python defining ``class ModelNew(torch.nn.Module)``.
    Untrusted: it only ever runs in a sandbox subprocess of its own (``sandbox.torch_eval``)."""

    id: str
    source: str


@dataclass(frozen=True)
class TorchRequest:
    """Evaluate ``candidates`` against a KernelBench-format task: ``task`` is the Python of a file
    defining ``Model``, ``get_inputs()``, ``get_init_inputs()`` and optionally
    ``get_verify_inputs()`` (further input sets, other sizes).  Task code is trusted: the server's
    own files, never a client's.  ``compiled``: also time against ``torch.compile(Model)``."""

    id: str
    task: str
    candidates: tuple[TorchCandidate, ...]
    seeds: tuple[int, ...] = (1, 2, 3)
    budget: Budget = field(default_factory=Budget)
    time: bool = True
    compiled: bool = True
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not self.seeds:
            raise ValueError("an evaluation needs at least one seed")


@dataclass(frozen=True)
class TorchCandidateResult:
    """One ``ModelNew``'s verdict.  ``result``: status, checks and the paired speedup against the
    eager ``Model`` (``baseline_timing``: eager, interleaved); ``compiled_*``: the paired speedup
    against ``torch.compile(Model)`` (0: not timed).  ``task_error``: the task's own model failed
    here (no verdict on the candidate).  ``footprint_bytes``: the task's own device memory (its
    benchmark inputs, outputs and parameters); ``peak_memory_bytes``: the most the evaluation
    held on the device (0: on the CPU); ``wall_ms``: the answer's median time per call by the host
    clock, measured for speedups of 1.5 or more (0: not measured).  ``phases``: where the
    evaluation's seconds went, by phase (``sandbox.torch_eval``: ``startup_s`` torch imported and
    the device's context in the fresh process, while it waited for its answer when started
    ahead; ``task_s``; ``reference_s`` the reference on every input set, ``to_host_s`` of it its
    outputs copied to the host; ``footprint_s``; ``work_s`` the FLOP count; ``ceilings_s``;
    ``alone_s`` the reference timed alone; ``load_s`` the answer's module and ``ModelNew``;
    ``verify_s``; ``time_s`` the paired timing; ``recheck_s`` the checks after it; ``floor_s``;
    ``wall_s``; ``compiled_s``; ``compare_s`` and ``poison_s``, the comparisons and the poisoning
    of free memory within ``verify_s`` and ``recheck_s``.  The executor adds ``build_wait_s``, what
    the request waited for a build since its previous answer ran, ``build_s`` the build's own
    seconds when it was built for this request, ``queue_s`` the device busy with other requests,
    ``spawn_s`` what of the worker's start was not hidden behind the answer before it, and
    ``worker_s`` the worker's whole call)."""

    result: CandidateResult
    compiled_speedup: float = 0.0
    compiled_speedup_low: float = 0.0
    compiled_speedup_high: float = 0.0
    compiled_timing: Timing | None = None
    task_error: str = ""
    footprint_bytes: int = 0
    peak_memory_bytes: int = 0
    wall_ms: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TorchResult:
    request_id: str
    candidates: tuple[TorchCandidateResult, ...]
    device: DeviceInfo | None = None
    schema_version: int = SCHEMA_VERSION


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


class ContractError(InputError, ValueError):
    """A message that does not match the contract (wrong shape, wrong version)."""


# --------------------------------------------------------------------------- request bounds

# CUDA's launch limits (every architecture the sandbox supports) and the largest shared memory
# one block may use (sm_90: 227 KiB).
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_BLOCK_THREADS = 1024
MAX_SHARED_BYTES = 227 << 10
_ARCH = re.compile(r"(sm|compute)_[1-9][0-9]{1,2}[af]?")


@dataclass(frozen=True)
class RequestLimits:
    """What one evaluation may ask for: the worker operator's settings, never the client's."""

    max_timeout_s: float = 600.0  # Budget.timeout_s, per candidate
    max_memory_bytes: int = 64 << 30  # Budget.gpu_memory_bytes
    max_candidates: int = 64
    max_source_bytes: int = 1 << 20  # per kernel source
    max_problems: int = 64  # verification sizes
    max_args: int = 256  # kernel arguments (and constants) per problem
    max_seeds: int = 16
    max_samples: int = 100_000
    max_text_chars: int = 4096  # names, labels, options, messages of a request


class RequestError(ContractError):
    """A well-formed request that asks for something out of bounds; ``field`` names where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def validate_request(request: EvalRequest, limits: RequestLimits = RequestLimits()) -> None:
    """Check every field of ``request`` against the device's limits and the worker's ``limits``;
    raises :class:`RequestError` naming the first field out of bounds.  Run at every boundary a
    request crosses into an executor (the worker service, the local executor)."""
    _Bounds(limits).request(request)


def validate_torch_request(request: TorchRequest, limits: RequestLimits = RequestLimits()) -> None:
    """:func:`validate_request` for a :class:`TorchRequest`."""
    b = _Bounds(limits)
    b.text("id", request.id, nonempty=True, cap=200)
    b.budget(request.budget)
    b.count("task", len(request.task.encode()), limits.max_source_bytes, "bytes")
    b.count("candidates", len(request.candidates), limits.max_candidates, "candidates")
    ids: set[str] = set()
    for i, cand in enumerate(request.candidates):
        b.text(f"candidates[{i}].id", cand.id, nonempty=True)
        if cand.id in ids:
            raise RequestError(f"candidates[{i}].id", f"{cand.id!r} names two candidates")
        ids.add(cand.id)
        b.count(f"candidates[{i}].source", len(cand.source.encode()), limits.max_source_bytes, "bytes")
    b.count("seeds", len(request.seeds), limits.max_seeds, "seeds")
    for i, seed in enumerate(request.seeds):
        if not 0 <= seed < 2**63:
            raise RequestError(f"seeds[{i}]", f"{seed} is not in 0..2^63-1")


class _Bounds:
    def __init__(self, limits: RequestLimits) -> None:
        self.limits = limits
        self.memory = limits.max_memory_bytes

    def request(self, r: EvalRequest) -> None:
        lim = self.limits
        self.text("id", r.id, nonempty=True, cap=200)
        self.budget(r.budget)
        self.memory = r.budget.gpu_memory_bytes
        self.options(r.options)
        self.kernel("baseline", r.baseline)
        self.count("candidates", len(r.candidates), lim.max_candidates, "candidates")
        ids: set[str] = set()
        for i, cand in enumerate(r.candidates):
            where = f"candidates[{i}]"
            self.text(f"{where}.id", cand.id, nonempty=True)
            if cand.id in ids:
                raise RequestError(f"{where}.id", f"{cand.id!r} names two candidates")
            ids.add(cand.id)
            self.kernel(f"{where}.kernel", cand.kernel)
            if cand.launches is not None:
                if len(cand.launches) != len(r.verify_problems) + 1:
                    raise RequestError(
                        f"{where}.launches",
                        f"{len(cand.launches)} launches for {len(r.verify_problems) + 1} problems",
                    )
                for j, launch in enumerate(cand.launches):
                    self.launch(f"{where}.launches[{j}]", launch)
        self.count("verify_problems", len(r.verify_problems), lim.max_problems, "problems")
        for i, problem in enumerate(r.verify_problems):
            self.problem(f"verify_problems[{i}]", problem)
        self.problem("bench_problem", r.bench_problem)
        self.count("seeds", len(r.seeds), lim.max_seeds, "seeds")
        for i, seed in enumerate(r.seeds):
            if not 0 <= seed < 2**63:
                raise RequestError(f"seeds[{i}]", f"{seed} is not in 0..2^63-1")
        tolerances = ((f"tolerances[{i}]", t) for i, t in enumerate(r.tolerances))
        self.count("tolerances", len(r.tolerances), lim.max_args, "tolerances")
        for where, tol in [*tolerances, *([("tolerance", r.tolerance)] if r.tolerance else [])]:
            self.text(f"{where}.arg", tol.arg)
            for key in ("atol", "rtol", "norm"):
                value = getattr(tol, key)
                if value is not None and not (math.isfinite(value) and value >= 0):
                    raise RequestError(f"{where}.{key}", f"{value} is not a finite number >= 0")
        for i, name in enumerate(r.allow_precision):
            if name not in PRECISIONS:
                raise RequestError(f"allow_precision[{i}]", f"{name!r} is not one of {', '.join(PRECISIONS)}")

    def budget(self, b: Budget) -> None:
        lim = self.limits
        self.number("budget.timeout_s", b.timeout_s, lim.max_timeout_s)
        self.number("budget.time_budget_ms", b.time_budget_ms, lim.max_timeout_s * 1000)
        self.number("budget.target_rel_spread", b.target_rel_spread, 1e6, positive=False)
        self.count("budget.min_samples", b.min_samples, lim.max_samples, "samples", low=1)
        self.count("budget.max_samples", b.max_samples, lim.max_samples, "samples", low=b.min_samples)
        self.count("budget.gpu_memory_bytes", b.gpu_memory_bytes, lim.max_memory_bytes, "bytes", low=1)

    def options(self, o: EvalOptions) -> None:
        if o.arch and not _ARCH.fullmatch(o.arch):
            raise RequestError("options.arch", f"{o.arch[:40]!r} is not an architecture such as sm_90")
        if o.backend not in ("cupy", "pycuda"):
            raise RequestError("options.backend", f"{o.backend[:40]!r} is not cupy or pycuda")

    def kernel(self, where: str, k: KernelSource) -> None:
        self.count(f"{where}.headers", len(k.headers), self.limits.max_args, "headers")
        texts = [k.source, *k.headers, *k.headers.values()]  # the unit's own headers count as its source
        size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
        if size > self.limits.max_source_bytes:
            raise RequestError(
                f"{where}.source", f"{size} bytes, more than this worker's {self.limits.max_source_bytes}"
            )
        self.text(f"{where}.name", k.name, nonempty=True)
        self.text(f"{where}.filename", k.filename, nonempty=True)
        self.count(f"{where}.options", len(k.options), self.limits.max_args, "options")
        for i, option in enumerate(k.options):
            self.text(f"{where}.options[{i}]", option)

    def problem(self, where: str, p: Problem) -> None:
        self.text(f"{where}.label", p.label)
        self.count(f"{where}.args", len(p.args) + len(p.constants), self.limits.max_args, "arguments")
        for name, value in p.sizes.items():
            self.text(f"{where}.sizes", name, nonempty=True)
            if abs(value) >= 2**62:
                raise RequestError(f"{where}.sizes.{name[:40]}", f"{value} is out of range")
        total = 0
        for i, a in enumerate(p.args):
            at = f"{where}.args[{i}]"
            self.text(f"{at}.name", a.name, nonempty=True)
            if a.role not in ("in", "out", "inout", "scalar"):
                raise RequestError(f"{at}.role", f"{a.role[:40]!r} is not in, out, inout or scalar")
            total += self.array(at, a.dtype, a.count if a.role != "scalar" else 0, a.dist)
            if math.isnan(a.value):
                raise RequestError(f"{at}.value", "NaN is not a scalar argument's value")
            if not 0 <= a.offset <= (a.count if a.role != "scalar" else 0):
                raise RequestError(f"{at}.offset", f"{a.offset} is outside the array (0..{a.count})")
            if a.compare is not None:
                if a.role not in ("out", "inout"):
                    raise RequestError(f"{at}.compare", "only an output has elements to compare")
                self.region(f"{at}.compare", a.compare, a.count)
        inputs = {a.name: a for a in p.args if a.role in ("in", "inout")}
        for i, a in enumerate(p.args):
            src = inputs.get(a.dist.source) if a.dist.kind == "copy" else None
            if a.dist.kind == "copy" and (
                a.name not in inputs
                or src is None
                or src is a
                or (src.dtype, src.count) != (a.dtype, a.count)
            ):
                raise RequestError(
                    f"{where}.args[{i}].dist.source",
                    f"{a.dist.source[:40]!r} is not another input array of the same type and count",
                )
        for i, c in enumerate(p.constants):
            at = f"{where}.constants[{i}]"
            self.text(f"{at}.name", c.name, nonempty=True)
            if not CONSTANT_NAME.fullmatch(c.name):
                raise RequestError(f"{at}.name", f"{c.name[:40]!r} is not a C++ variable name")
            src = inputs.get(c.dist.source) if c.dist.kind == "copy" else None
            if c.dist.kind == "copy" and (src is None or (src.dtype, src.count) != (c.dtype, c.count)):
                raise RequestError(
                    f"{at}.dist.source",
                    f"{c.dist.source[:40]!r} is not an input array argument of the same type and count",
                )
            total += self.array(at, c.dtype, c.count, c.dist)
        if total > self.memory:
            raise RequestError(
                f"{where}.args", f"{total} bytes of arrays, more than the memory cap of {self.memory}"
            )
        self.count(f"{where}.defines", len(p.defines), self.limits.max_args, "defines")
        for name, value in p.defines.items():
            if not name.isidentifier() or not name.isascii() or len(name) > 200:
                raise RequestError(f"{where}.defines", f"{name[:40]!r} is not a macro name")
            if abs(value) >= 2**62:
                raise RequestError(f"{where}.defines.{name}", f"{value} is out of range")
        self.launch(f"{where}.launch", p.launch)
        for key in ("bytes_moved", "flops"):
            self.count(f"{where}.{key}", getattr(p, key), 2**62, key)

    def array(self, where: str, dtype: str, count: int, dist: Distribution) -> int:
        size = element_bytes(dtype)
        if size is None:
            raise RequestError(f"{where}.dtype", f"{dtype[:40]!r} is not a known element type")
        self.count(f"{where}.count", count, 2**62, "elements")
        if count * size > self.memory:
            raise RequestError(
                f"{where}.count",
                f"{count} elements of {size} bytes exceed the memory cap of {self.memory} bytes",
            )
        if dist.kind not in ("uniform", "normal", "randint", "const", "arange", "copy", "values", "recorded"):
            raise RequestError(f"{where}.dist.kind", f"{dist.kind[:40]!r} is not a known distribution")
        if dist.kind == "recorded" and not recorded.is_digest(dist.source):
            raise RequestError(f"{where}.dist.source", "a recorded input is named by its SHA-256 digest")
        if dist.kind == "values" and (error := expression_error(dist.expr, ("i",))):
            raise RequestError(f"{where}.dist.expr", error)
        for key in ("low", "high", "value"):
            if not math.isfinite(getattr(dist, key)):
                raise RequestError(f"{where}.dist.{key}", f"{getattr(dist, key)} is not finite")
        return size * count

    def region(self, where: str, r: Region, count: int) -> None:
        if not 1 <= len(r.shape) <= 4 or len(r.index) != len(r.shape) or math.prod(r.shape) != count:
            raise RequestError(
                f"{where}.shape",
                f"{tuple(r.shape)} with {len(r.index)} index names is not a shape of {count}",
            )
        for name in r.index:
            if not name.isidentifier() or len(name) > 40 or name in MATH_CONSTANTS:
                raise RequestError(f"{where}.index", f"{name[:40]!r} is not an index name")
        if len(set(r.index)) != len(r.index):
            raise RequestError(f"{where}.index", "an index name appears twice")
        if r.written == bool(r.where):
            raise RequestError(f"{where}.where", "give either a condition or written, not both or neither")
        if r.where and (error := expression_error(r.where, r.index)):
            raise RequestError(f"{where}.where", error)

    def launch(self, where: str, launch: Launch) -> None:
        for part, dims, caps in (("grid", launch.grid, MAX_GRID), ("block", launch.block, MAX_BLOCK)):
            if len(dims) != 3 or not all(1 <= d <= cap for d, cap in zip(dims, caps, strict=True)):
                limits = ", ".join(f"1..{cap}" for cap in caps)
                raise RequestError(
                    f"{where}.{part}", f"{tuple(dims)} is outside the device's limits ({limits})"
                )
        threads = math.prod(launch.block)
        if threads > MAX_BLOCK_THREADS:
            raise RequestError(
                f"{where}.block", f"{threads} threads per block, more than {MAX_BLOCK_THREADS}"
            )
        self.count(f"{where}.shared_bytes", launch.shared_bytes, MAX_SHARED_BYTES, "bytes of shared memory")

    def number(self, where: str, value: float, cap: float, positive: bool = True) -> None:
        if not math.isfinite(value) or value < 0 or (positive and value == 0) or value > cap:
            low = "> 0" if positive else ">= 0"
            raise RequestError(where, f"{value} is not a finite number {low} and <= {cap:g}")

    def count(self, where: str, value: int, cap: int, unit: str, low: int = 0) -> None:
        if not low <= value <= cap:
            raise RequestError(where, f"{value} {unit} is outside {low}..{cap}")

    def text(self, where: str, value: str, nonempty: bool = False, cap: int | None = None) -> None:
        cap = cap or self.limits.max_text_chars
        if (nonempty and not value) or len(value) > cap or not value.isprintable():
            what = "1" if nonempty else "0"
            raise RequestError(where, f"must be {what}-{cap} printable characters")
