"""The pipe between an executor and its worker processes: jobs and replies as JSON, never pickles.

Jobs and replies travel as JSON (bytes as base64) over a private socket pair: a worker that
untrusted code took over can send the parent nothing but data, and a reply that does not decode to
the result the job expects is that job's ``crash`` (:func:`decode_reply`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cattrs

from sandbox.compiler import Compiled, resource_limited
from sandbox.contract import (
    CandidateResult,
    ContractError,
    DeviceInfo,
    EvalRequest,
    Status,
    TorchCandidate,
    TorchCandidateResult,
    TorchRequest,
)

# ``--handler module:factory`` of a worker process: what serves its jobs
DEFAULT_HANDLER = "sandbox.gpu_handler:GpuHandler"  # a GPU worker
COMPILE_HANDLER = "sandbox.child:CompileHandler"  # a compile worker

# --------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class Binary:
    """A compiled kernel: cubin and the (mangled) symbol to launch; ``symbols``: the lowered names
    of its ``__constant__`` data whose name expression is not their symbol (``mask<float>``)."""

    cubin: bytes
    symbol: str
    symbols: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EvalJob:
    """Evaluate one kernel of ``request``: the baseline itself (``index == -1``) or a candidate."""

    request: EvalRequest
    baseline: Binary
    index: int
    candidate: Binary | None = None


@dataclass(frozen=True)
class InfoJob:
    """Describe the device; measure its ceilings unless ``known`` already has them."""

    known: DeviceInfo | None = None


@dataclass(frozen=True)
class CompileJob:
    """Compile one untrusted unit (in a compile worker: :class:`CompileHandler`)."""

    source: str
    filename: str
    name_expressions: tuple[str, ...]
    arch: str
    options: tuple[str, ...]
    headers: dict[str, str]


@dataclass(frozen=True)
class TorchJob:
    """Evaluate candidate ``index`` of ``request`` (in a worker process of its own); ``build_dir``:
    where the build stage built it (:mod:`sandbox.torch_build`; "": build in the worker), for the
    arch list ``arch``; ``device``: the device as the executor measured it once (its ceilings:
    the physics floor's; None or unmeasured: the worker measures them)."""

    request: TorchRequest
    index: int
    build_dir: str = ""
    arch: str = ""
    device: DeviceInfo | None = None

    @property
    def candidate(self) -> TorchCandidate:
        return self.request.candidates[self.index]


@dataclass(frozen=True)
class BuildJob:
    """Build one PyTorch answer's extensions into ``directory`` for the arch list ``arch``
    (in a build worker: :class:`sandbox.torch_build.BuildHandler`)."""

    source: str
    directory: str
    arch: str


@dataclass(frozen=True)
class Built:
    """A build stage's verdict on one answer: ``verdict`` None: time it (built, or left for the
    timing worker to build); otherwise the answer's verdict (``compile_error``: its extension
    failed to build; ``timeout``: no build in time).  ``final``: the same source would end the
    same way (cached); not final: a deadline or a broken worker."""

    verdict: Status | None
    message: str
    seconds: float
    final: bool = True
    cached: bool = False


@dataclass(frozen=True)
class Reply:
    value: CandidateResult | DeviceInfo | Compiled | TorchCandidateResult | Built | None
    restart: bool = False  # the worker exits after this reply (sticky CUDA error)
    unavailable: str = ""  # the worker cannot work at all (no GPU, no CuPy): why


Job = EvalJob | InfoJob | CompileJob | TorchJob | BuildJob
Handler = Callable[[Job], Reply]

# --------------------------------------------------------------------------- the wire (JSON)

converter = cattrs.Converter()
converter.register_unstructure_hook(bytes, lambda b: base64.b64encode(b).decode("ascii"))
converter.register_structure_hook(bytes, lambda v, _: base64.b64decode(v, validate=True))
_JOBS: dict[str, type[Any]] = {
    "eval": EvalJob,
    "info": InfoJob,
    "compile": CompileJob,
    "torch": TorchJob,
    "build": BuildJob,
}
_VALUES: dict[str, type[Any]] = {
    "candidate": CandidateResult,
    "device": DeviceInfo,
    "compiled": Compiled,
    "torch": TorchCandidateResult,
    "built": Built,
}


def encode(message: Job | Reply | None) -> bytes:
    """A job, a reply, or None (stop) as JSON bytes."""
    if message is None:
        return b"null"
    if isinstance(message, Reply):
        value = message.value
        kind = next((k for k, t in _VALUES.items() if isinstance(value, t)), None)
        body: dict[str, Any] = {
            "reply": kind,
            "value": None if value is None else converter.unstructure(value),
            "restart": message.restart,
            "unavailable": message.unavailable,
        }
    else:
        kind = next(k for k, t in _JOBS.items() if isinstance(message, t))
        body = {"job": kind, "body": converter.unstructure(message)}
    return json.dumps(body, separators=(",", ":")).encode()


def decode_job(data: bytes) -> Job | None:
    """The parent's message (trusted: the parent wrote it)."""
    body = json.loads(data)
    if body is None:
        return None
    job: Job = converter.structure(body["body"], _JOBS[body["job"]])
    return job


def decode_reply(data: bytes, job: Job) -> Reply:
    """The worker's reply to ``job``, validated: JSON of the value type the job expects (for an
    evaluation, a result for that very candidate).  Raises :class:`ContractError` otherwise."""
    expected = {
        EvalJob: "candidate",
        InfoJob: "device",
        CompileJob: "compiled",
        TorchJob: "torch",
        BuildJob: "built",
    }[type(job)]
    try:
        body = json.loads(data)
        if not isinstance(body, dict) or set(body) != {"reply", "value", "restart", "unavailable"}:
            raise ValueError("not a reply")
        restart, unavailable = body["restart"], body["unavailable"]
        if not isinstance(restart, bool) or not isinstance(unavailable, str):
            raise ValueError("bad restart/unavailable")
        if body["value"] is None and body["reply"] is None:
            return Reply(None, restart, unavailable)
        if body["reply"] != expected:
            raise ValueError(f"a {body['reply']!r} reply to a {expected!r} job")
        value = converter.structure(body["value"], _VALUES[expected])
    except Exception as exc:  # JSON, shape or types: anything else is not a reply
        raise ContractError(
            f"malformed reply from the worker: {type(exc).__name__}: {str(exc)[:200]}"
        ) from None
    if isinstance(job, EvalJob) and value.candidate_id != job_id(job):
        raise ContractError(f"the worker answered for {value.candidate_id!r}, not {job_id(job)!r}")
    if isinstance(job, TorchJob) and value.result.candidate_id != job.candidate.id:
        raise ContractError(
            f"the worker answered for {value.result.candidate_id!r}, not {job.candidate.id!r}"
        )
    return Reply(value, restart, unavailable)


def failure_result(job: Job, status: Status, message: str) -> CandidateResult | TorchCandidateResult | None:
    """The result of an evaluation job that ended with ``status`` (None for other jobs)."""
    if isinstance(job, EvalJob):
        return CandidateResult(candidate_id=job_id(job), status=status, message=message)
    if isinstance(job, TorchJob):
        return TorchCandidateResult(CandidateResult(job.candidate.id, status, message))
    return None


def failed_reply(job: Job, status: Status, message: str) -> Reply:
    """The reply standing in for one the worker did not give.  A compile job that hung, crashed
    or died (a limit of :mod:`sandbox.confine` ends it so) is that unit's ``resource limit``
    compile error; one that did not run says why."""
    if isinstance(job, CompileJob):
        if status in (Status.TIMEOUT, Status.CRASH):
            return Reply(resource_limited(f"compile {message}"))
        return Reply(None, unavailable=f"compile worker: {message}")
    if isinstance(job, BuildJob):  # hung: the answer's timeout; died: the timing worker judges it
        verdict = Status.TIMEOUT if status is Status.TIMEOUT else None
        return Reply(Built(verdict, f"build {message}", 0.0, final=False))
    return Reply(failure_result(job, status, message))


def job_id(job: EvalJob) -> str:
    """The candidate id an evaluation job answers for (``baseline`` for the baseline)."""
    return "baseline" if job.index < 0 else job.request.candidates[job.index].id
