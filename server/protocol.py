"""The editor <-> server contract: every custom LSP method and command, with its params and result.

One typed module, one casing.  The classes are attrs classes with snake_case attributes; on the
wire they are camelCase, through the converter pygls already uses (lsprotocol's, which renames
every attrs class's fields and structures command arguments from the handlers' annotations).
Fields without a default are always sent; a field whose default is ``None`` is left out when it
is ``None`` (``kernel?: string`` in TypeScript).

``extension/src/protocol.ts`` carries the same declarations between its ``BEGIN generated`` and
``END generated`` lines: :func:`typescript` writes them, and ``tests/test_protocol.py`` fails when
the two disagree (``python -m server.protocol extension/src/protocol.ts`` rewrites that block).

To add a method or command: declare its classes here, add them to :data:`WIRE_TYPES` (and its
name to :data:`METHODS`), and regenerate the TypeScript.
"""

from __future__ import annotations

import enum
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any

import attrs
import cattrs
import cattrs.gen
from lsprotocol import types as lsp

from server.texts import SIMULATED

# ------------------------------------------------------------------------------------- names

OPTIMIZE_COMMAND = "cudaAgent.optimize"  # [KernelRef] -> RunStarted; then RUN_FINISHED
BENCHMARK_COMMAND = "cudaAgent.benchmark"  # [KernelRef] -> RunStarted; then RUN_FINISHED
COMPARE_COMMAND = "cudaAgent.compare"  # [CompareRef] -> RunStarted; then RUN_FINISHED
PROFILE_COMMAND = "cudaAgent.profile"  # [KernelRef] -> RunStarted; then RUN_FINISHED
CAPTURE_COMMAND = "cudaAgent.capture"  # [CaptureRef] -> RunStarted; then workspace/applyEdit, RUN_FINISHED
SPEEDUP_COMMAND = "cudaAgent.speedup"  # [SpeedupRef] -> RunStarted; then workspace/applyEdit, RUN_FINISHED
CANCEL_COMMAND = "cudaAgent.cancel"  # [RunRef] -> CancelResult
APPLY_REWRITE_COMMAND = "cudaAgent.applyRewrite"  # [RunRef] -> ApplyResult (via workspace/applyEdit)
ADD_SPEC_COMMAND = "cudaAgent.addSpec"  # [KernelRef] -> ApplyResult (via workspace/applyEdit)
REWRITE_REQUEST = "cudaAgent/rewrite"  # RunRef -> Rewrite
RESULTS_REQUEST = "cudaAgent/results"  # ResultsParams -> Results
STATUS_NOTIFICATION = "cudaAgent/status"  # server -> client: ServerStatus
RUN_FINISHED_NOTIFICATION = "cudaAgent/runFinished"  # server -> client: RunFinished

METHODS = {
    "OPTIMIZE_COMMAND": OPTIMIZE_COMMAND,
    "BENCHMARK_COMMAND": BENCHMARK_COMMAND,
    "COMPARE_COMMAND": COMPARE_COMMAND,
    "PROFILE_COMMAND": PROFILE_COMMAND,
    "CAPTURE_COMMAND": CAPTURE_COMMAND,
    "SPEEDUP_COMMAND": SPEEDUP_COMMAND,
    "CANCEL_COMMAND": CANCEL_COMMAND,
    "APPLY_REWRITE_COMMAND": APPLY_REWRITE_COMMAND,
    "ADD_SPEC_COMMAND": ADD_SPEC_COMMAND,
    "REWRITE_REQUEST": REWRITE_REQUEST,
    "RESULTS_REQUEST": RESULTS_REQUEST,
    "STATUS_NOTIFICATION": STATUS_NOTIFICATION,
    "RUN_FINISHED_NOTIFICATION": RUN_FINISHED_NOTIFICATION,
}

ANNOTATION = "cuda-agent.verified-rewrite"  # change annotation of a rewrite's workspace edit
PROGRAM_ANNOTATION = "cuda-agent.program-speedup"  # of a program's rewrites (always previewed)


# ------------------------------------------------------------------------------------- values


class RunKind(str, enum.Enum):
    OPTIMIZE = "optimize"
    BENCHMARK = "benchmark"
    COMPARE = "compare"
    PROFILE = "profile"
    CAPTURE = "capture"
    SPEEDUP = "speedup"


class StartStatus(str, enum.Enum):
    """How a run request was answered: ``started`` (a RunFinished follows), ``busy`` (this kernel
    already has a run: ``runId`` is that run's), ``error`` (nothing started; ``message`` says why)."""

    STARTED = "started"
    BUSY = "busy"
    ERROR = "error"


class RunStatus(str, enum.Enum):
    """How a run ended: ``ok`` (benchmark or profile measured, capture inserted its spec, compare
    verified, or optimize has a verified faster rewrite ready), ``not_improved`` and
    ``baseline_failed`` (optimize: ``agent.loop.RunOutcome``), ``unavailable`` (profile: no profiler
    counters), ``error`` (the run could not go on; ``message`` says why), or the sandbox's verdict
    (``sandbox.contract.Status``) of a benchmark's or compare's kernel that did not pass."""

    OK = "ok"
    NOT_IMPROVED = "not_improved"
    BASELINE_FAILED = "baseline_failed"
    UNAVAILABLE = "unavailable"
    ERROR = "error"
    COMPILE_ERROR = "compile_error"
    LAUNCH_ERROR = "launch_error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    MISMATCH = "mismatch"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    IMPLAUSIBLE = "implausible"


class ApplyReason(str, enum.Enum):
    """Why an edit was or was not applied: ``applied``; ``stale`` (the document changed or was
    closed since the run began: nothing overwritten, and the server has said so in a warning);
    ``no_rewrite`` (no verified rewrite for that run: already applied, or the server restarted);
    ``declined`` (the client did not apply the edit: the user declined, or the editor refused it;
    ``message`` has its reason); ``too_large`` (the document is too large to analyse)."""

    APPLIED = "applied"
    STALE = "stale"
    NO_REWRITE = "no_rewrite"
    DECLINED = "declined"
    TOO_LARGE = "too_large"


@attrs.define(frozen=True)
class KernelRef:
    """A kernel of an open document; ``kernel`` may be left out when the file has one kernel."""

    uri: str
    kernel: str | None = None


@attrs.define(frozen=True)
class CompareRef:
    """Compare ``kernel`` of ``uri`` with the rewrite ``with``: a kernel of the same file (``NAME``)
    or of another (``PATH:NAME``)."""

    uri: str
    with_: str  # on the wire: ``with``
    kernel: str | None = None


@attrs.define(frozen=True)
class CaptureRef:
    """Run ``command`` (the program and its arguments, as a list) in ``cwd`` (default: the workspace
    folder) watching its kernel launches, and write the spec of the first launch of ``kernel`` (of
    ``uri``; left out: the first launch of any kernel in the workspace) above that kernel."""

    uri: str
    command: list[str]
    kernel: str | None = None
    cwd: str | None = None


@attrs.define(frozen=True)
class SpeedupRef:
    """Make the program ``command`` faster (``cuda-agent speedup``): run it in ``cwd`` (default: the
    workspace folder), optimize its hottest kernels (``top``, up to ``share`` of GPU time, in
    ``budgetS`` seconds), and, with ``build``, check the patched program end to end (rebuilt, run,
    ``outputs`` and standard output (less lines matching ``ignore``) compared within
    ``rtol``/``atol``) before the files are restored; the rewrites then come as one edit to
    confirm (``workspace/applyEdit``, every file, annotated ``needsConfirmation``)."""

    uri: str
    command: list[str]
    cwd: str | None = None
    build: str | None = None
    outputs: list[str] = attrs.field(factory=list)
    ignore: list[str] = attrs.field(factory=list)
    rtol: float = 1e-5
    atol: float = 1e-8
    top: int = 3
    share: float = 0.8
    budget_s: float = 120.0
    runs: int = 3


@attrs.define(frozen=True)
class RunRef:
    run_id: str


@attrs.define(frozen=True)
class RunStarted:
    run_id: str
    kind: RunKind
    status: StartStatus
    message: str


@attrs.define(frozen=True)
class AttemptRecord:
    """One candidate's verdict (``agent.attempts.AttemptRecord``, field for field).  ``status``: ok,
    compile_error, launch_error, crash, timeout, mismatch, rejected, cancelled, implausible;
    ``rule``: the rule a rejected/implausible candidate broke; the check fields (``problem``,
    ``output``, ``firstBadIndex`` (-1: none), ``values``, ``errorRatio``) describe the failing
    check, else the one closest to its bound; ``compileLine``/``compileColumn`` (1-based, 0: none)
    place the first compile error in the candidate's file (the original file with the candidate in
    place of the kernel), ``compileLog`` is the compiler's log from there; ``reward`` is absent for
    a cancelled candidate.  Numbers a verdict lacks are 0."""

    index: int
    candidate_id: str
    description: str
    status: str
    message: str
    rule: str
    duplicate_of: str
    problem: str
    output: str
    first_bad_index: int
    values: str
    error_ratio: float
    compile_line: int
    compile_column: int
    compile_log: str
    speedup: float
    speedup_low: float
    speedup_high: float
    median_ms: float
    registers: int
    spill_stores: int
    spill_loads: int
    reward: float | None = None


@attrs.define(frozen=True)
class RunFinished:
    """The end of a run (``status``: see ``RunStatus``; an optimize run's ``ok`` comes with a
    verified faster rewrite ready: ``rewriteReady``).  Optimize fills ``speedup*``,
    benchmark the timing fields; the others are 0.  ``attempts``: every candidate's verdict of an
    optimize run, in evaluation order (empty for the others); ``simulated``: the numbers come from
    the simulated GPU (``executor.kind test``), not a measurement."""

    run_id: str
    kind: RunKind
    uri: str
    kernel: str
    status: RunStatus
    message: str
    cancelled: bool
    rewrite_ready: bool
    speedup: float
    speedup_low: float
    speedup_high: float
    median_ms: float
    rel_spread: float
    gbps: float
    pct_peak: float
    attempts: list[AttemptRecord]
    simulated: bool


@attrs.define(frozen=True)
class CancelResult:
    cancelled: bool
    message: str


@attrs.define(frozen=True)
class ApplyResult:
    """What became of an edit the server sent (``reason``: see ``ApplyReason``)."""

    applied: bool
    reason: ApplyReason
    message: str

    @classmethod
    def answered(cls, result: lsp.ApplyWorkspaceEditResult) -> ApplyResult:
        """The client's answer to the server's ``workspace/applyEdit``."""
        if result.applied:
            return cls(True, ApplyReason.APPLIED, "applied")
        return cls(False, ApplyReason.DECLINED, result.failure_reason or "declined")


@attrs.define(frozen=True)
class Rewrite:
    """A verified rewrite for the side-by-side diff; ``edits`` turn ``original`` into ``rewritten``;
    ``simulated``: its speedup comes from the simulated GPU, not a measurement."""

    run_id: str
    uri: str
    version: int
    kernel: str
    original: str
    rewritten: str
    edits: list[lsp.TextEdit]
    speedup: float
    summary: str
    simulated: bool


@attrs.define(frozen=True)
class ResultsParams:
    uri: str | None = None


@attrs.define(frozen=True)
class Roofline:
    """The device's measured ceilings (0: not measured) and the bench problem's work from the spec
    (``server.store.Roofline``): arithmetic intensity is ``flops / bytesMoved``."""

    peak_gbps: float
    peak_gflops: float
    peak_tensor_gflops: float
    bytes_moved: int
    flops: int


@attrs.define(frozen=True)
class BenchmarkRow:
    """The last benchmark of a kernel (``server.store.BenchmarkRecord``, field for field);
    ``pctPeak`` is of the device's measured copy bandwidth."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    rel_spread: float
    gbps: float
    pct_peak: float
    problem: str
    device: str
    date: str
    registers: int
    spill_bytes: int
    gflops: float
    simulated: bool
    roofline: Roofline | None = None


@attrs.define(frozen=True)
class OptimizeRow:
    """The last optimize run of a kernel (``server.store.OptimizeRecord``, field for field):
    ``outcome`` is the loop's (``improved``...), ``attempts`` the number of candidates and
    ``history`` their verdicts in evaluation order."""

    run_id: str
    outcome: str
    speedup: float
    speedup_low: float
    speedup_high: float
    baseline_ms: float
    baseline_spread: float
    candidate_ms: float
    candidate_spread: float
    sizes: list[str]
    seeds: int
    tolerance: str
    device: str
    date: str
    summary: str
    attempts: int
    stop_reason: str
    original_hash: str
    rewritten_hash: str
    launch_todo: str
    baseline_gbps: float
    baseline_gflops: float
    simulated: bool
    history: list[AttemptRecord]
    roofline: Roofline | None = None


@attrs.define(frozen=True)
class CompareRow:
    """The last "Compare with…" a kernel took part in (``server.store.CompareRecord``, field for
    field): ``role`` ``original`` or ``rewrite``, ``other`` the other kernel, ``status`` the
    rewrite's, ``speedup`` the rewrite's over the original's."""

    run_id: str
    role: str
    other: str
    verified: bool
    status: str
    headline: str
    speedup: float
    speedup_low: float
    speedup_high: float
    original_ms: float
    rewrite_ms: float
    device: str
    date: str
    kernel_hash: str
    simulated: bool


@attrs.define(frozen=True)
class Stall:
    """A warp stall reason: average warps stalled for it per issued instruction."""

    reason: str
    per_issue: float


@attrs.define(frozen=True)
class ProfileMetrics:
    """Nsight Compute's view of one launch (``sandbox.contract.Profile``, field for field), or why
    there is none (``available`` false); percentages are of the device's peak."""

    available: bool
    message: str
    memory_pct: float
    dram_pct: float
    compute_pct: float
    achieved_occupancy_pct: float
    l2_hit_pct: float
    duration_us: float
    stalls: list[Stall]
    theoretical_occupancy_pct: float
    occupancy_limiter: str
    dram_bytes: float
    l2_bytes: float


@attrs.define(frozen=True)
class ProfiledKernel:
    """One kernel of a profile run: ``original`` or ``rewrite``."""

    label: str
    description: str
    profile: ProfileMetrics


@attrs.define(frozen=True)
class ProfileRow:
    """The last Nsight Compute profile of a kernel (``server.store.ProfileRecord``, field for field)."""

    run_id: str
    problem: str
    device: str
    date: str
    kernels: list[ProfiledKernel]
    kernel_hash: str


@attrs.define(frozen=True)
class KernelResults:
    """One kernel's stored results (``server.store``), absent where it has none."""

    file: str
    kernel: str
    benchmark: BenchmarkRow | None = None
    optimize: OptimizeRow | None = None
    compare: CompareRow | None = None
    profile: ProfileRow | None = None


@attrs.define(frozen=True)
class Results:
    results: list[KernelResults]


@attrs.define(frozen=True)
class RunningStatus:
    run_id: str
    kind: RunKind
    kernel: str
    percent: int


@attrs.define(frozen=True)
class ServerStatus:
    executor: str
    device: str
    running: RunningStatus | None


@attrs.define(frozen=True)
class RewriteRequest:
    """The JSON-RPC message of ``cudaAgent/rewrite`` (pygls structures params by message type)."""

    id: int | str
    params: RunRef
    method: str = REWRITE_REQUEST
    jsonrpc: str = "2.0"


@attrs.define(frozen=True)
class ResultsRequest:
    id: int | str
    params: ResultsParams = attrs.field(factory=ResultsParams)
    method: str = RESULTS_REQUEST
    jsonrpc: str = "2.0"


# what the server's protocol structures incoming custom requests as
REQUEST_TYPES: dict[str, type] = {REWRITE_REQUEST: RewriteRequest, RESULTS_REQUEST: ResultsRequest}

WIRE_TYPES: list[type] = [
    RunKind,
    StartStatus,
    RunStatus,
    ApplyReason,
    KernelRef,
    CompareRef,
    CaptureRef,
    SpeedupRef,
    RunRef,
    RunStarted,
    AttemptRecord,
    RunFinished,
    CancelResult,
    ApplyResult,
    Rewrite,
    ResultsParams,
    Roofline,
    BenchmarkRow,
    OptimizeRow,
    CompareRow,
    Stall,
    ProfileMetrics,
    ProfiledKernel,
    ProfileRow,
    KernelResults,
    Results,
    RunningStatus,
    ServerStatus,
]


INPUT_TYPES = (
    KernelRef,
    CompareRef,
    CaptureRef,
    SpeedupRef,
    RunRef,
    ResultsParams,
)  # what clients send: strings must be strings


def register_strict_inputs(converter: cattrs.Converter) -> None:
    """Structure :data:`INPUT_TYPES` from camelCase, refusing a non-string where a string belongs
    (cattrs would turn ``{"runId": 7}`` into ``"7"``)."""

    def text(value: Any, tp: Any) -> str | None:
        if value is None and tp is not str:
            return None
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {type(value).__name__}")
        return value

    def texts(value: Any, tp: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TypeError("expected a list of strings")
        return list(value)

    def number(value: Any, tp: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise TypeError(f"expected a finite number, got {value!r}"[:80])
        return float(value)

    def integer(value: Any, tp: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an integer, got {value!r}"[:80])
        return value

    hooks = {list[str]: texts, float: number, int: integer}
    for cls in INPUT_TYPES:
        hints = typing.get_type_hints(cls)
        renames = {
            f.name: cattrs.gen.override(rename=camel(f.name), struct_hook=hooks.get(hints[f.name], text))
            for f in attrs.fields(cls)
        }
        hook = cattrs.gen.make_dict_structure_fn(cls, converter, **renames)  # type: ignore[arg-type]
        converter.register_structure_hook(cls, hook)


def camel(name: str) -> str:
    """``speedup_low`` -> ``speedupLow`` (the wire's casing)."""
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


_records = cattrs.Converter()
Row = typing.TypeVar("Row")


def row(cls: type[Row], record: Any) -> Row:
    """A stored record (``server.store``, as :func:`sandbox.contract.to_dict` gives it) as its
    results-view row ``cls`` (snake_case here; camelCase on the wire, as every type)."""
    return _records.structure(record, cls)


# ------------------------------------------------------------------------------------- TypeScript

BEGIN = "// BEGIN generated by `python -m server.protocol extension/src/protocol.ts`: do not edit"
END = "// END generated"


def _ts_type(tp: Any) -> str:
    if tp is str:
        return "string"
    if tp in (int, float):
        return "number"
    if tp is bool:
        return "boolean"
    if tp is Any:
        return "unknown"
    if isinstance(tp, type) and (attrs.has(tp) or issubclass(tp, enum.Enum)):
        return tp.__name__
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is list:
        inner = _ts_type(args[0])
        return f"({inner})[]" if " " in inner else f"{inner}[]"
    if origin is dict:
        return f"Record<string, {_ts_type(args[1])}>"
    if origin in (typing.Union, types.UnionType):
        return " | ".join("null" if a is type(None) else _ts_type(a) for a in args)
    raise TypeError(f"no TypeScript type for {tp!r}")


def _ts_declaration(cls: type) -> str:
    doc = (cls.__doc__ or "").strip()
    lines = (
        [f"/** {' '.join(doc.replace('``', '`').split())} */"]
        if doc and not doc.startswith(cls.__name__ + "(")
        else []
    )
    if issubclass(cls, enum.Enum):
        values = " | ".join(f'"{m.value}"' for m in cls)
        return "\n".join([*lines, f"export type {cls.__name__} = {values};"])
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    lines.append(f"export interface {cls.__name__} {{")
    for f in attrs.fields(typing.cast(Any, cls)):
        tp = hints[f.name]
        optional = f.default is None
        if optional:
            tp = typing.Union[tuple(a for a in typing.get_args(tp) if a is not type(None))]  # noqa: UP007
        lines.append(f"  {camel(f.name)}{'?' if optional else ''}: {_ts_type(tp)};")
    lines.append("}")
    return "\n".join(lines)


def typescript() -> str:
    """The generated block of ``protocol.ts``: method names, then every wire type."""
    out = [BEGIN]
    out += [f'export const {name} = "{value}";' for name, value in METHODS.items()]
    out.append(f'export const REWRITE_ANNOTATION = "{ANNOTATION}";')
    out.append(f'export const PROGRAM_ANNOTATION = "{PROGRAM_ANNOTATION}";')
    out.append(f'export const SIMULATED = "{SIMULATED}";')
    for cls in WIRE_TYPES:
        out += ["", _ts_declaration(cls)]
    out.append(END)
    return "\n".join(out) + "\n"


def generated_block(text: str) -> str:
    """The generated block of a ``protocol.ts`` text ("" when it has none)."""
    start, end = text.find(BEGIN), text.find(END)
    return text[start : end + len(END)] + "\n" if 0 <= start < end else ""


def write_typescript(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    old = generated_block(text)
    path.write_text(text.replace(old, typescript()) if old else text + "\n" + typescript(), encoding="utf-8")


if __name__ == "__main__":
    write_typescript(Path(sys.argv[1]))
