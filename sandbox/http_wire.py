"""The worker service's HTTP wire: its paths (the health check's is :data:`base.http.HEALTH_PATH`), the NDJSON events of an evaluation stream, the cancel body.

Served by :mod:`sandbox.service`, spoken by :class:`sandbox.remote.RemoteExecutor`.  Every message
is a dataclass (de)serialised by the contract's converter (:func:`sandbox.contract.to_dict`,
:func:`~sandbox.contract.from_dict`); an event is one line ``{"event": kind, ...its fields}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

from sandbox.contract import SCHEMA_VERSION, ContractError, EvalResult, Progress, from_dict, to_dict

EVALUATE_PATH = "/evaluate"
CANCEL_PATH = "/cancel"
DEVICE_PATH = "/device"
NDJSON = "application/x-ndjson"
HEARTBEAT_S = 2.0  # the worker sends at least one line this often on an evaluation stream


@dataclass(frozen=True)
class QueuedEvent:
    """The evaluation waits for GPU ``gpu``, behind ``ahead`` others."""

    kind: ClassVar[str] = "queued"
    gpu: int
    ahead: int


@dataclass(frozen=True)
class StartedEvent:
    """The evaluation runs on GPU ``gpu``."""

    kind: ClassVar[str] = "started"
    gpu: int


@dataclass(frozen=True)
class ProgressEvent:
    """The executor's progress on the evaluation."""

    kind: ClassVar[str] = "progress"
    progress: Progress


@dataclass(frozen=True)
class HeartbeatEvent:
    """Sent live (never replayed) at least every ``HEARTBEAT_S``: a silent stream is a dead one."""

    kind: ClassVar[str] = "heartbeat"


@dataclass(frozen=True)
class ResultEvent:
    """The evaluation's result; the stream's last line."""

    kind: ClassVar[str] = "result"
    result: EvalResult

    def __post_init__(self) -> None:
        if self.result.schema_version != SCHEMA_VERSION:
            raise ValueError(
                f"schema version {self.result.schema_version} is not supported (this build speaks {SCHEMA_VERSION})"
            )


@dataclass(frozen=True)
class ErrorEvent:
    """The evaluation failed on the worker (``message`` says why); the stream's last line."""

    kind: ClassVar[str] = "error"
    message: str


StreamEvent = QueuedEvent | StartedEvent | ProgressEvent | HeartbeatEvent | ResultEvent | ErrorEvent
FinalEvent = ResultEvent | ErrorEvent
_KINDS: dict[str, type[StreamEvent]] = {
    cls.kind: cls
    for cls in (QueuedEvent, StartedEvent, ProgressEvent, HeartbeatEvent, ResultEvent, ErrorEvent)
}


def encode_event(event: StreamEvent) -> bytes:
    """One NDJSON line: ``{"event": kind, ...fields}``."""
    return json.dumps({"event": event.kind, **to_dict(event)}, separators=(",", ":")).encode() + b"\n"


def decode_event(line: str | bytes) -> StreamEvent:
    """The event one line holds; :class:`~sandbox.contract.ContractError` for anything else."""
    try:
        data = json.loads(line)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ContractError(f"not JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("event"), str):
        raise ContractError(f'not an event: a JSON {type(data).__name__} without an "event" name')
    name = data.pop("event")
    cls = _KINDS.get(name)
    if cls is None:
        raise ContractError(f"unknown event {name[:40]!r}")
    return from_dict(cls, data)


@dataclass(frozen=True)
class CancelRequest:
    """``POST /cancel``'s body: cancel the evaluation of request ``id`` (in the body, so any id works)."""

    id: str


@dataclass(frozen=True)
class CancelReply:
    """``/cancel``'s answer for a known id: ``cancelled`` if it was running, else ``finished``."""

    id: str
    cancelled: bool
    finished: bool = False
