"""The editor <-> server contract: every custom LSP method and command, with its params and result.

One typed module, one casing.  The messages are attrs classes declared here; the results they
carry are the records of the lower layers, used as they are (:mod:`agent.records`: one frozen
dataclass per result kind, the same object the result store keeps; :class:`sandbox.contract.Profile`
and ``Status``; :class:`agent.attempts.AttemptRecord`).  Attributes are snake_case; on the wire
they are camelCase, through the converter pygls already uses (lsprotocol's, which renames every
attrs class's fields, plus :func:`register` for the records and the strict inputs).  Fields without
a default are always sent; a field whose default is ``None`` is left out when it is ``None``
(``kernel?: string`` in TypeScript).

``extension/src/protocol.generated.ts`` declares every type of :data:`WIRE_TYPES` in TypeScript,
written by :mod:`server.protocol_ts` (``python -m server.protocol_ts``); ``tests/test_protocol.py``
fails when the checked-in file is not current.

To add a method or command: declare its classes here, add them to :data:`WIRE_TYPES` (and its
name to :data:`METHODS`), and regenerate the TypeScript.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import typing
from typing import Any

import attrs
import cattrs
import cattrs.gen
from lsprotocol import types as lsp

from agent.attempts import AttemptRecord
from agent.loop import RunOutcome, StopKind
from agent.records import (
    BenchmarkRecord,
    CompareRecord,
    CompareRole,
    KernelResults,
    OptimizeRecord,
    ProfiledKernel,
    ProfileRecord,
    Roofline,
)
from sandbox.contract import Profile, Stall, Status
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
class RunFinished:
    """The end of a run (``status``: see ``RunStatus``; an optimize run's ``ok`` comes with a
    verified faster rewrite ready: ``rewriteReady``).  The run's record, as stored, is in the field
    of its kind (``optimize``: every candidate's verdict in ``history``; ``compare``: the original
    kernel's side), absent when the run ended before it had one; ``simulated``: the numbers come
    from the simulated GPU (``executor.kind test``), not a measurement."""

    run_id: str
    kind: RunKind
    uri: str
    kernel: str
    status: RunStatus
    message: str
    cancelled: bool
    rewrite_ready: bool
    simulated: bool
    benchmark: BenchmarkRecord | None = None
    optimize: OptimizeRecord | None = None
    compare: CompareRecord | None = None
    profile: ProfileRecord | None = None


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
    """A verified rewrite waiting for the user, for the side-by-side diff: ``original`` (the whole
    document as the run saw it, at ``version``) and ``rewritten``; ``simulated``: its speedup
    comes from the simulated GPU, not a measurement."""

    run_id: str
    uri: str
    version: int
    kernel: str
    original: str
    rewritten: str
    speedup: float
    summary: str
    simulated: bool

    @property
    def speedup_text(self) -> str:
        return f"{self.speedup:.2f}× faster{', ' + SIMULATED if self.simulated else ''}"


@attrs.define(frozen=True)
class ResultsParams:
    uri: str | None = None


@attrs.define(frozen=True)
class KernelEntry:
    """One kernel's stored results (``server.store``), by its workspace-relative ``file``."""

    file: str
    kernel: str
    results: KernelResults


@attrs.define(frozen=True)
class Results:
    results: list[KernelEntry]


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
    RunOutcome,
    StopKind,
    Status,
    CompareRole,
    Stall,
    Profile,
    AttemptRecord,
    Roofline,
    BenchmarkRecord,
    OptimizeRecord,
    CompareRecord,
    ProfiledKernel,
    ProfileRecord,
    KernelResults,
    RunFinished,
    CancelResult,
    ApplyResult,
    Rewrite,
    ResultsParams,
    KernelEntry,
    Results,
    RunningStatus,
    ServerStatus,
]


RECORD_TYPES: list[type] = [
    t for t in WIRE_TYPES if dataclasses.is_dataclass(t)
]  # the lower layers' records the wire carries as they are

INPUT_TYPES = (
    KernelRef,
    CompareRef,
    CaptureRef,
    SpeedupRef,
    RunRef,
    ResultsParams,
)  # what clients send: strings must be strings


def register(converter: cattrs.Converter) -> None:
    """Teach pygls' converter this module's casing beyond lsprotocol's: the records
    (:data:`RECORD_TYPES`, frozen dataclasses of the lower layers) go out and come back in
    camelCase, a field whose default is None left out when None; and :data:`INPUT_TYPES` come
    in from camelCase refusing a non-string where a string belongs (cattrs would turn
    ``{"runId": 7}`` into ``"7"``)."""

    def record_fields(cls: type) -> dict[str, Any]:
        return {
            f.name: cattrs.gen.override(rename=camel(f.name), omit_if_default=f.default is None)
            for f in dataclasses.fields(cls)
        }

    for cls in RECORD_TYPES:
        converter.register_unstructure_hook(
            cls, cattrs.gen.make_dict_unstructure_fn(cls, converter, **record_fields(cls))
        )
        converter.register_structure_hook(
            cls, cattrs.gen.make_dict_structure_fn(cls, converter, **record_fields(cls))
        )

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
    for input_cls in INPUT_TYPES:
        hints = typing.get_type_hints(input_cls)
        renames = {
            f.name: cattrs.gen.override(rename=camel(f.name), struct_hook=hooks.get(hints[f.name], text))
            for f in attrs.fields(input_cls)
        }
        hook = cattrs.gen.make_dict_structure_fn(input_cls, converter, **renames)  # type: ignore[arg-type]
        converter.register_structure_hook(input_cls, hook)


def camel(name: str) -> str:
    """``speedup_low`` -> ``speedupLow`` (the wire's casing)."""
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)
