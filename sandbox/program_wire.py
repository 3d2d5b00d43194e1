"""The worker's ``POST /program``: a token holder's program built and run on the worker's GPU.

Served by :class:`sandbox.programs.ProgramHost` (through :mod:`sandbox.service`, only with
``cuda-agent worker --allow-programs``), spoken by :class:`agent.program_remote.RemoteMachine`.
The project travels by content: ``files`` names every file (relative path -> SHA-256), ``bodies``
carries the bytes of the digests the worker does not hold yet (a re-run sends only what
changed); a digest the worker lacks is answered 409 with ``missing``.  The answer is the run's
:class:`~sandbox.capture.CaptureRun` (its saved inputs put in the worker's recorded store:
``stored``), the build's status and tail, and the output files asked for.  Bytes travel as base64.
``POST /cancel`` naming the request's ``id`` (:class:`~sandbox.http_wire.CancelRequest`, from the
same requester), or the client closing the connection, stops the build or run (its whole process
group); the answer is then ``cancelled``.

:func:`check_request` is the request's whole check (422 or 413, ``field`` naming what is refused).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import cattrs

from sandbox import recorded
from sandbox.capture import CaptureRun
from sandbox.contract import ContractError, RequestError

PROGRAM_PATH = "/program"
PROGRAMS_OFF = (
    "this worker does not run programs: start it with `cuda-agent worker --allow-programs` "
    "(a program runs with the worker's rights, in its sandbox)"
)
MAX_ID_CHARS = 200  # a request's id

T = TypeVar("T")


@dataclass(frozen=True)
class ProgramLimits:
    """What one ``/program`` request may ask for: the worker operator's settings."""

    max_body_bytes: int = 512 << 20  # the request as sent (base64 bodies)
    max_files: int = 20_000
    max_file_bytes: int = 256 << 20
    max_project_bytes: int = 1 << 30  # every file of the project together
    max_store_bytes: int = 8 << 30  # the worker's file store, all projects together (oldest go)
    max_path_chars: int = 1024
    max_outputs: int = 64
    max_reply_bytes: int = 256 << 20  # the output files and standard output sent back
    max_timeout_s: float = 3600.0  # the build's, and the run's
    max_command_chars: int = 16_384  # the build command, the argv together


@dataclass(frozen=True)
class ProjectFile:
    """One file of the project: its path relative to the project's folder, its content's
    SHA-256, whether it is executable."""

    path: str
    sha256: str
    executable: bool = False


@dataclass(frozen=True)
class ProgramRequest:
    """Build (``build``: a shell command, "" for none) then run (``argv``; empty: build only) the
    project in a fresh folder.  ``kernel``/``max_launches``/``save``/``watch``: the capture's
    (:func:`sandbox.capture.run_program`); ``outputs``: files (relative paths) sent back.
    ``id``: what ``POST /cancel`` names it by (for its requester only): the client's, unguessable
    (128 random bits unless given)."""

    files: tuple[ProjectFile, ...]
    bodies: Mapping[str, bytes] = field(default_factory=dict)  # sha256 -> bytes
    build: str = ""
    argv: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    kernel: str = ""
    max_launches: int = 0
    save: bool = False
    watch: bool = True
    timeout_s: float = 600.0
    id: str = field(default_factory=lambda: secrets.token_urlsafe(16))


@dataclass(frozen=True)
class ProgramReply:
    """The build's exit status and the end of its output; the run (None: build only, the build
    failed, or cancelled); the output files the run left (one it did not write is absent);
    ``cancelled``: stopped by ``POST /cancel`` or its client leaving, nothing else set."""

    build_status: int = 0
    build_tail: str = ""
    run: CaptureRun | None = None
    outputs: Mapping[str, bytes] = field(default_factory=dict)
    cancelled: bool = False


@dataclass(frozen=True)
class MissingFiles:
    """409: the worker holds none of these digests; send the request again with their bodies."""

    error: str
    missing: tuple[str, ...]


converter = cattrs.Converter()
converter.register_unstructure_hook(bytes, lambda b: base64.b64encode(b).decode("ascii"))
converter.register_structure_hook(bytes, lambda v, _: base64.b64decode(v, validate=True))


def encode(message: Any) -> bytes:
    return json.dumps(converter.unstructure(message), separators=(",", ":")).encode()


def decode(cls: type[T], data: bytes) -> T:
    """``cls`` from JSON bytes; :class:`~sandbox.contract.ContractError` for anything else."""
    try:
        value: T = converter.structure(json.loads(data), cls)
    except Exception as exc:  # JSON, shape, base64 or types: not a message of this contract
        raise ContractError(f"malformed {cls.__name__}: {type(exc).__name__}: {str(exc)[:300]}") from None
    return value


def check_path(where: str, path: str, limits: ProgramLimits) -> None:
    """A project-relative path: not empty, not absolute, no ``.``/``..``/empty component, no NUL
    or backslash; :class:`~sandbox.contract.RequestError` naming ``where`` otherwise."""
    if not path or len(path) > limits.max_path_chars:
        raise RequestError(where, f"a path of 1 to {limits.max_path_chars} characters")
    if path.startswith("/"):
        raise RequestError(where, f"{path[:80]!r} is absolute: paths are relative to the project")
    if "\x00" in path or "\\" in path:
        raise RequestError(where, f"{path[:80]!r} holds a NUL or a backslash")
    if any(part in ("", ".", "..") for part in path.split("/")):
        raise RequestError(where, f"{path[:80]!r} has an empty, '.' or '..' component")


def check_request(r: ProgramRequest, limits: ProgramLimits) -> None:
    """Every field of ``r`` against ``limits``: :class:`~sandbox.contract.RequestError` naming the
    first refused (``TooLarge`` for a size cap: the service answers 413, else 422)."""
    if len(r.files) > limits.max_files:
        raise TooLarge("files", f"{len(r.files)} files; at most {limits.max_files}")
    paths: set[str] = set()
    for i, f in enumerate(r.files):
        check_path(f"files[{i}].path", f.path, limits)
        if not recorded.is_digest(f.sha256):
            raise RequestError(f"files[{i}].sha256", "not a SHA-256 digest (64 lowercase hex digits)")
        if f.path in paths:
            raise RequestError(f"files[{i}].path", f"{f.path[:80]!r} is named twice")
        paths.add(f.path)
    for path in paths:  # "a" and "a/b": a file cannot be a folder too
        parent = path.rpartition("/")[0]
        while parent:
            if parent in paths:
                raise RequestError("files", f"{parent[:80]!r} is a file and a folder")
            parent = parent.rpartition("/")[0]
    named = {f.sha256 for f in r.files}
    for digest, body in r.bodies.items():
        where = f"bodies[{digest[:64]}]"
        if len(body) > limits.max_file_bytes:
            raise TooLarge(where, f"{len(body)} bytes; at most {limits.max_file_bytes} per file")
        if digest not in named:
            raise RequestError(where, "no file has this digest")
        if hashlib.sha256(body).hexdigest() != digest:
            raise RequestError(where, "the bytes do not match their digest")
    if len(r.outputs) > limits.max_outputs:
        raise TooLarge("outputs", f"{len(r.outputs)} outputs; at most {limits.max_outputs}")
    for i, out in enumerate(r.outputs):
        check_path(f"outputs[{i}]", out, limits)
    if len(r.build) + sum(len(a) for a in r.argv) > limits.max_command_chars:
        raise TooLarge("argv", f"build command and argv over {limits.max_command_chars} characters")
    if any("\x00" in a for a in (r.build, *r.argv)):
        raise RequestError("argv", "a NUL character in the build command or argv")
    if not r.build and not r.argv:
        raise RequestError("argv", "nothing to do: neither a build command nor a program")
    if not 0 < r.timeout_s <= limits.max_timeout_s:
        raise RequestError("timeout_s", f"{r.timeout_s} is not in (0, {limits.max_timeout_s:g}] s")
    if not 0 <= r.max_launches <= 1024:
        raise RequestError("max_launches", f"{r.max_launches} is not in 0..1024")
    if not 0 < len(r.id) <= MAX_ID_CHARS:
        raise RequestError("id", f"an id of 1 to {MAX_ID_CHARS} characters")
    if len(r.kernel) > limits.max_command_chars:
        raise TooLarge("kernel", f"over {limits.max_command_chars} characters")


class TooLarge(RequestError):
    """A request over one of the worker's size caps (413)."""
