"""Where a program builds and runs: :class:`Machine`, this machine's (:class:`LocalMachine`), and
the worker's side of ``POST /program`` (:class:`ProgramHost`).

``cuda-agent speedup`` (:mod:`agent.program`) runs the user's program through a :class:`Machine`.
On a worker started with ``--allow-programs``, :class:`ProgramHost` keeps the projects' files by
content (``<root>/store/<sha256>``), lays each request's project out in a fresh folder
(``<root>/runs/<random>/project``, removed after), builds and runs it there through a machine
confined to that folder (:func:`sandbox.isolation.program_prefix`: bubblewrap, only the folder
writable), puts the saved inputs of a captured launch in the worker's recorded store
(:mod:`sandbox.recorded`, by digest: evaluation requests name them) and reads back the output
files asked for, never through a link, within :class:`~sandbox.program_wire.ProgramLimits`.
A build or run starts a process group of its own, killed whole on a timeout or a cancel.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from sandbox import recorded
from sandbox.capture import CaptureError, CaptureRun, wait_or_stop
from sandbox.program_wire import ProgramLimits, ProgramReply, ProgramRequest, TooLarge

_TAIL_CHARS = 4000  # of a build's output, kept


class Machine(Protocol):
    """Where the program runs and builds (the user's GPU, a worker's, a simulated one)."""

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
        """Run the program with kernel timing (and, with ``max_launches``, launch records), or
        plainly (``watch=False``: its own wall time, nothing added); its standard output kept."""
        ...

    def build(
        self, command: str, cwd: str, timeout: float | None = None, cancel: threading.Event | None = None
    ) -> tuple[int, str]:
        """Run the user's build command in a shell: (exit status, the end of its output); status
        124 past ``timeout``; :class:`~sandbox.capture.CaptureError` once ``cancel`` is set (the
        build stopped, as :meth:`run` is)."""
        ...


class LocalMachine:
    """This machine's GPU: the program runs under the capture library (:mod:`sandbox.capture`),
    it and the build with ``env`` (None: this process's environment), under the command prefix
    ``wrap`` (a sandbox; the capture's records then go to ``scratch``, a folder it can write)."""

    def __init__(
        self, env: Mapping[str, str] | None = None, wrap: Sequence[str] = (), scratch: str | None = None
    ) -> None:
        self.env = dict(env) if env is not None else None
        self.wrap = tuple(wrap)
        self.scratch = scratch

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
        from sandbox.capture import run_program

        return run_program(
            [*self.wrap, *argv],
            kernel=kernel,
            max_launches=max_launches,
            save_dir=save_dir,
            timeout=timeout,
            cwd=cwd,
            interactive=False,
            cancel=cancel,
            times=watch,
            capture_stdout=True,
            watch=watch,
            env=self.env,
            scratch_dir=self.scratch,
        )

    def build(
        self, command: str, cwd: str, timeout: float | None = None, cancel: threading.Event | None = None
    ) -> tuple[int, str]:
        with tempfile.TemporaryFile() as out:
            proc = subprocess.Popen(
                [*self.wrap, "/bin/sh", "-c", command],
                cwd=cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a group of its own: a timeout or a cancel stops it whole
            )
            try:
                status = wait_or_stop(proc, f"`{command}`", timeout, cancel)
            except CaptureError:
                if cancel is not None and cancel.is_set():
                    raise
                return 124, f"`{command}` did not finish within {timeout:g} s"
            out.seek(max(out.tell() - _TAIL_CHARS * 4, 0))
            return status, out.read().decode(errors="replace")[-_TAIL_CHARS:]


# --------------------------------------------------------------------------- the worker's side

MachineFor = Callable[[Path], Machine]  # a machine confined to one request's folder


class ProgramHost:
    """Builds and runs the projects of ``POST /program`` (see the module docstring), one at a
    time (``busy``); ``machine_for(folder)``: the machine a request's program runs on."""

    def __init__(
        self, machine_for: MachineFor, root: Path | None = None, limits: ProgramLimits | None = None
    ) -> None:
        self.machine_for = machine_for
        self.limits = limits or ProgramLimits()
        self.root = root or Path(tempfile.mkdtemp(prefix="cuda-agent-programs-"))
        self.store = self.root / "store"
        self.runs = self.root / "runs"
        self.busy = threading.Lock()

    def missing(self, request: ProgramRequest) -> tuple[str, ...]:
        """The digests of ``request``'s files that neither the store nor the request holds."""
        return tuple(
            dict.fromkeys(
                f.sha256
                for f in request.files
                if f.sha256 not in request.bodies and not (self.store / f.sha256).is_file()
            )
        )

    def serve(self, request: ProgramRequest, cancel: threading.Event | None = None) -> ProgramReply:
        """Build and run ``request`` (checked by :func:`~sandbox.program_wire.check_request`, no
        file missing); :class:`~sandbox.program_wire.TooLarge` for a cap passed,
        :class:`~sandbox.capture.CaptureError` when the program cannot run.  Once ``cancel`` is
        set, the build or run is stopped (its whole process group) and the reply says
        ``cancelled``."""
        try:
            return self._serve(request, cancel)
        except CaptureError:
            if cancel is not None and cancel.is_set():
                return ProgramReply(cancelled=True)
            raise

    def _serve(self, request: ProgramRequest, cancel: threading.Event | None) -> ProgramReply:
        for body in request.bodies.values():
            recorded.put(body, self.store)
        self._prune({f.sha256 for f in request.files})
        self.runs.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(dir=self.runs))
        try:
            project = folder / "project"
            self._lay_out(request, project)
            (folder / "scratch").mkdir()
            machine = self.machine_for(folder)
            status, tail = 0, ""
            if request.build:
                status, tail = machine.build(request.build, str(project), request.timeout_s, cancel)
                if status != 0 or not request.argv:
                    return ProgramReply(status, tail)
            saved = folder / "saved"
            run = machine.run(
                request.argv,
                str(project),
                kernel=request.kernel or None,
                max_launches=request.max_launches,
                save_dir=str(saved) if request.save else None,
                timeout=request.timeout_s,
                cancel=cancel,
                watch=request.watch,
            )
            stored = self._store_saved(run, saved) if request.save else {}
            room = self.limits.max_reply_bytes - len(run.stdout)
            if room < 0:
                raise TooLarge("stdout", f"{len(run.stdout)} bytes; at most {self.limits.max_reply_bytes}")
            outputs: dict[str, bytes] = {}
            for path in request.outputs:
                data = read_inside(project, path, room)
                if data is not None:
                    outputs[path] = data
                    room -= len(data)
            return ProgramReply(status, tail, replace(run, save_dir="", stored=stored), outputs)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _prune(self, keep: set[str]) -> None:
        """The store back under ``max_store_bytes``: the files used longest ago go first (a
        request's files are touched as it lays them out), never one of ``keep``."""
        if not self.store.is_dir():
            return
        files = []
        for entry in os.scandir(self.store):
            if entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                files.append((info.st_mtime, info.st_size, entry.name))
        total = sum(size for _, size, _ in files)
        for _, size, name in sorted(files):
            if total <= self.limits.max_store_bytes:
                break
            if name not in keep:
                (self.store / name).unlink(missing_ok=True)
                total -= size

    def _lay_out(self, request: ProgramRequest, project: Path) -> None:
        total = 0
        for f in request.files:
            total += (self.store / f.sha256).stat().st_size
            if total > self.limits.max_project_bytes:
                raise TooLarge("files", f"the project is over {self.limits.max_project_bytes} bytes")
        for f in request.files:
            target = project / f.path  # checked: relative, no '..'; the folder is new, with no link
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.store / f.sha256, target)
            os.utime(self.store / f.sha256)  # used now: the last the store lets go
            target.chmod(0o755 if f.executable else 0o644)

    def _store_saved(self, run: CaptureRun, saved: Path) -> dict[str, str]:
        """The saved inputs the run's launches name, put in the recorded store: name -> digest
        (a name that is not a plain file of ``saved`` is skipped)."""
        out: dict[str, str] = {}
        for launch in run.launches:
            for p in launch.params:
                name = p.pointer.saved if p.pointer is not None else ""
                if not name or "/" in name or name in (".", "..") or name in out:
                    continue
                data = read_inside(saved, name, self.limits.max_file_bytes)
                if data is not None:
                    out[name] = recorded.put(data)
        return out


def read_inside(folder: Path, path: str, cap: int) -> bytes | None:
    """The regular file ``path`` (relative, checked) under ``folder``, opened one component at a
    time without following a link; None when it is absent, a link or not a regular file;
    :class:`~sandbox.program_wire.TooLarge` over ``cap`` bytes."""
    parts = path.split("/")
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        file = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(file, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None
        if info.st_size > cap:
            raise TooLarge("outputs", f"{path[:80]}: {info.st_size} bytes; {max(cap, 0)} left to send")
        data = f.read(cap + 1)
    if len(data) > cap:
        raise TooLarge("outputs", f"{path[:80]}: over the {max(cap, 0)} bytes left to send")
    return data
