"""A worker's GPU as the :class:`~sandbox.programs.Machine` of ``cuda-agent speedup``: the program
builds and runs there (``POST /program``, :mod:`sandbox.program_wire`), its files come back.

Each build or run sends the project (every regular file under the run's folder but dot-folders,
links and the outputs themselves) by content: paths with their SHA-256, and the bytes of only
those digests the worker does not hold yet, so a re-run after a patch sends the changed files
alone.  A worker that lost some (restarted) says which (409), and they are sent again.  The
worker lays the project out in a fresh folder, runs the build command first (every request:
nothing built survives a request), then the program; the output files it wrote come back and are
written here, where the flow reads them; a captured launch's saved inputs stay in the worker's
recorded store, named by digest (``CaptureRun.stored``), which is where the worker's evaluations
read them.  The user's files change only here (the patch, with ``--apply``), never on the worker.
A set ``cancel`` stops the build or run on the worker (``POST /cancel`` with the request's random
id) and raises :class:`~sandbox.capture.CaptureError` as a local run does.  Whether the program
goes to a worker is :func:`program_machine`'s choice, the same for the CLI and the editor.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from base.errors import InputError
from sandbox.capture import CANCEL_POLL_S, CaptureError, CaptureRun
from sandbox.contract import ContractError, to_dict
from sandbox.executor import AuthError, WorkerUnavailable
from sandbox.http_wire import CANCEL_PATH, CancelRequest
from sandbox.program_wire import (
    PROGRAM_PATH,
    MissingFiles,
    ProgramReply,
    ProgramRequest,
    ProjectFile,
    decode,
    encode,
)
from sandbox.remote import CONNECT_TIMEOUT_S

if TYPE_CHECKING:
    from agent.program import ProgramSettings
    from sandbox.executors import ExecutorSettings
    from sandbox.programs import Machine

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 600.0  # a run or build with no timeout of its own
_SLACK_S = 60.0  # the worker's time to lay the project out and answer, over the run's own


class RemoteMachine:
    """The GPU of the worker at ``url`` (started with ``--allow-programs``), reached with
    ``token``.  ``build``: the build command every run is preceded by on the worker (the
    project is built there from its sources); ``outputs``: the files (relative to the run's
    folder) the program writes, brought back after each run.  ``sent``: the paths whose bytes
    each request carried, in order."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        build: str = "",
        outputs: Sequence[str] = (),
        verify: bool | str = True,
    ) -> None:
        self.url = url.rstrip("/")
        self.build_command = build
        self.outputs = tuple(outputs)
        self.held: set[str] = set()  # digests the worker holds, as far as this client knows
        self.sent: list[tuple[str, ...]] = []
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.Client(base_url=self.url, headers=headers, verify=verify)

    def close(self) -> None:
        self._client.close()

    def build(
        self, command: str, cwd: str, timeout: float | None = None, cancel: threading.Event | None = None
    ) -> tuple[int, str]:
        request = ProgramRequest((), build=command, timeout_s=timeout or DEFAULT_TIMEOUT_S)
        reply = self._post(cwd, request, f"`{command}`", cancel)
        return reply.build_status, reply.build_tail

    def run(
        self,
        argv: Sequence[str],
        cwd: str,
        *,
        kernel: str | None = None,
        max_launches: int = 0,
        save_dir: str | None = None,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
        watch: bool = True,
    ) -> CaptureRun:
        request = ProgramRequest(
            (),
            build=self.build_command,
            argv=tuple(argv),
            outputs=self.outputs,
            kernel=kernel or "",
            max_launches=max_launches,
            save=bool(save_dir),
            watch=watch,
            timeout_s=timeout or DEFAULT_TIMEOUT_S,
        )
        reply = self._post(cwd, request, argv[0] if argv else "the program", cancel)
        if reply.run is None:
            raise CaptureError(
                f"`{self.build_command}` failed on the worker with status {reply.build_status}: "
                f"{reply.build_tail.strip()[-300:]}"
            )
        for path in self.outputs:  # only what was asked for, at the paths asked for
            if (data := reply.outputs.get(path)) is not None:
                target = Path(cwd) / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        return replace(reply.run, save_dir=save_dir or "")

    # ---------------------------------------------------------------- the wire

    def _project(self, cwd: str) -> dict[str, tuple[ProjectFile, Path]]:
        """Every regular file under ``cwd`` (not in a dot-folder, not a link, not an output),
        by relative path, with its digest."""
        root = Path(cwd)
        skip = set(self.outputs)
        out: dict[str, tuple[ProjectFile, Path]] = {}
        for folder, dirs, names in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not (Path(folder) / d).is_symlink())
            for name in sorted(names):
                path = Path(folder) / name
                rel = path.relative_to(root).as_posix()
                info = path.lstat()
                if rel in skip or not stat.S_ISREG(info.st_mode):
                    continue
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                out[rel] = (ProjectFile(rel, digest, bool(info.st_mode & 0o111)), path)
        return out

    def _post(
        self, cwd: str, request: ProgramRequest, name: str, cancel: threading.Event | None
    ) -> ProgramReply:
        """``request`` with the project under ``cwd``; :class:`~sandbox.capture.CaptureError`
        saying ``name`` was cancelled once ``cancel`` is set (as :class:`LocalMachine` says it):
        the worker is told at once (``POST /cancel``) and stops it."""
        if cancel is not None and cancel.is_set():
            raise CaptureError(f"{name}: cancelled")
        project = self._project(cwd)
        files = tuple(f for f, _ in project.values())
        by_digest = {f.sha256: path for f, path in project.values()}
        send = {d for d in by_digest if d not in self.held}
        for _ in range(2):  # the second time with what the worker says it lacks
            bodies = {d: by_digest[d].read_bytes() for d in sorted(send)}
            self.sent.append(tuple(sorted(f.path for f in files if f.sha256 in send)))
            response = self._send(replace(request, files=files, bodies=bodies), cancel)
            if response.status_code == 409:
                try:
                    send = set(decode(MissingFiles, response.content).missing) & set(by_digest)
                except ContractError as exc:
                    raise WorkerUnavailable(f"{self.url} answered 409 with no file list: {exc}") from None
                self.held -= send
                continue
            if response.status_code == 401:
                raise AuthError(f"the worker at {self.url} refused the token: {_message(response)}")
            if response.status_code != 200:
                raise CaptureError(
                    f"the worker at {self.url} refused the program ({response.status_code}): {_message(response)}"
                )
            try:
                reply = decode(ProgramReply, response.content)
            except ContractError as exc:
                raise WorkerUnavailable(f"{self.url} is not a cuda-agent worker: {exc}") from None
            self.held |= set(by_digest)
            if reply.cancelled:
                raise CaptureError(f"{name}: cancelled")
            return reply
        raise WorkerUnavailable(f"the worker at {self.url} keeps losing the project's files")

    def _send(self, request: ProgramRequest, cancel: threading.Event | None) -> httpx.Response:
        timeout = httpx.Timeout(
            connect=CONNECT_TIMEOUT_S, read=2 * request.timeout_s + _SLACK_S, write=300.0, pool=None
        )
        answered = threading.Event()
        if cancel is not None:
            threading.Thread(
                target=self._forward_cancel, args=(request.id, cancel, answered), daemon=True
            ).start()
        try:
            return self._client.post(
                PROGRAM_PATH,
                content=encode(request),
                headers={"Content-Type": "application/json"},
                timeout=timeout,
            )
        except httpx.HTTPError as exc:
            raise WorkerUnavailable(f"cannot reach the worker at {self.url}: {exc}") from exc
        finally:
            answered.set()

    def _forward_cancel(self, request_id: str, cancel: threading.Event, answered: threading.Event) -> None:
        """Tell the worker to stop request ``request_id`` the moment ``cancel`` is set, unless it
        answered first (runs in its own thread)."""
        while not answered.is_set():
            if cancel.wait(CANCEL_POLL_S):
                if not answered.is_set():
                    try:
                        self._client.post(CANCEL_PATH, json=to_dict(CancelRequest(request_id)), timeout=5.0)
                    except httpx.HTTPError as exc:
                        log.warning("could not cancel %s on %s: %s", request_id, self.url, exc)
                return


class MachineError(InputError, ValueError):
    """The job cannot go to the worker: a path outside the folder it gets, or no token."""


def program_machine(
    executor: ExecutorSettings, settings: ProgramSettings, local: Callable[[], Machine]
) -> Machine:
    """Where the program of ``settings`` runs, for the CLI and the editor alike: the GPU of the
    worker ``executor`` names (kind ``remote`` with its URL; the job's sources and outputs must lie
    in its folder, ``settings.cwd``, which is what the worker gets), else ``local()``.
    :class:`MachineError` says why the worker cannot take the job."""
    if executor.kind != "remote" or not executor.url:
        return local()
    root = Path(settings.cwd).resolve()
    for path in [*settings.sources, *(o.path for o in settings.outputs)]:
        where = (root / path).resolve()
        if where != root and root not in where.parents:
            raise MachineError(f"{path}: outside the current folder {root}, which is what the worker gets")
    token = executor.token.resolve()
    if not token:
        source = executor.token.source.partition(":")[2] or "no token"
        raise MachineError(f"the worker {executor.url} needs its token, and {source} gives none")
    outputs = [(root / o.path).resolve().relative_to(root).as_posix() for o in settings.outputs]
    return RemoteMachine(executor.url, token, build=settings.build, outputs=outputs)


def _message(response: httpx.Response) -> str:
    try:
        return str(response.json().get("error", ""))[:500] or response.text[:500]
    except (ValueError, AttributeError):
        return response.text[:500]
