"""One worker process seen from the parent: start it, call it with a deadline, kill, restart.

The worker is a fresh interpreter (``python -m sandbox.child``) started with a clean environment
(:mod:`sandbox.isolation`), in its own session and process group, with stdout sent to /dev/null;
jobs and replies travel as JSON (:mod:`sandbox.wire`).  A job past its deadline gets the whole
process group killed and comes back ``timeout``; a worker that dies comes back ``crash``; after a
sticky CUDA error the worker answers ``crash`` and exits; either way a fresh worker is started for
the next job.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection

from sandbox.contract import ContractError, Status
from sandbox.isolation import PACKAGE_ROOT, clean_env
from sandbox.wire import COMPILE_HANDLER, DEFAULT_HANDLER, Job, Reply, decode_reply, encode, failed_reply

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 256 << 20  # a reply larger than this is a broken worker
CANCEL_POLL_S = 0.05  # how often a running job looks at its cancel event


class WorkerProcess:
    """One worker process: start, call with a deadline, kill its process group, restart."""

    def __init__(
        self,
        device: int = 0,
        backend: str = "cupy",
        handler: str = DEFAULT_HANDLER,
        prefix: Sequence[str] = (),
        args: Sequence[str] = (),
    ) -> None:
        self.device = device
        self.backend = backend
        self.handler = handler
        self.prefix = list(prefix)
        self.args = list(args)  # more arguments for ``python -m sandbox.child``
        self.proc: subprocess.Popen[bytes] | None = None
        self.conn: Connection | None = None
        self.restarts = 0
        self.closed = False  # closed for good: never started again

    def start(self) -> None:
        parent, child = socket.socketpair()
        cmd = [
            *self.prefix,
            sys.executable,
            "-m",
            "sandbox.child",
            "--fd",
            str(child.fileno()),
            "--device",
            str(self.device),
            "--backend",
            self.backend,
            "--handler",
            self.handler,
            *self.args,
        ]
        self.proc = subprocess.Popen(
            cmd,
            pass_fds=(child.fileno(),),
            env=clean_env(compile_only=self.handler == COMPILE_HANDLER),
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            cwd=str(PACKAGE_ROOT),
        )
        child.close()
        self.conn = Connection(parent.detach())

    def call(self, job: Job, timeout: float, cancel: threading.Event | None = None) -> Reply:
        """Send ``job``; the reply, or a ``timeout``/``crash``/``cancelled`` result if none comes in
        ``timeout`` s, the worker dies, or ``cancel`` is set meanwhile (the worker is then replaced;
        after a cancel, only when the next job comes)."""
        if self.closed:
            return failed_reply(job, Status.CANCELLED, "the worker was closed")
        if self.proc is None or self.proc.poll() is not None:
            self.restart()
        assert self.conn is not None
        deadline = time.monotonic() + timeout
        try:
            self.conn.send_bytes(encode(job))
            while not self.conn.poll(max(0.0, min(deadline - time.monotonic(), CANCEL_POLL_S))):
                if cancel is not None and cancel.is_set():
                    self.kill()
                    return failed_reply(job, Status.CANCELLED, "cancelled while running")
                if time.monotonic() >= deadline:
                    self.restart()
                    return failed_reply(job, Status.TIMEOUT, f"killed at its {timeout:.1f} s deadline")
            data = self.conn.recv_bytes(MAX_MESSAGE_BYTES)
        except (EOFError, OSError) as exc:
            code = self.proc.wait(timeout=5) if self.proc else None
            self.restart()
            return failed_reply(job, Status.CRASH, f"worker died ({_exit_text(code)}): {exc or 'EOF'}")
        try:
            reply = decode_reply(data, job)
        except ContractError as exc:
            log.warning("worker %d: %s", self.device, exc)
            self.restart()
            return failed_reply(job, Status.CRASH, f"{exc}; the worker was restarted")
        if reply.restart:
            self.restart()
        return reply

    def kill(self) -> None:
        """Kill the worker's whole process group (the worker and anything it started)."""
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.kill()
        if not self.closed:
            self.restarts += 1
            self.start()

    def close(self, timeout: float = 5.0) -> int | None:
        """Ask the worker to exit; kill it if it does not. Returns its exit status."""
        self.closed = True
        if self.proc is None:
            return None
        proc = self.proc
        try:
            if self.conn is not None:
                self.conn.send_bytes(encode(None))
            code: int | None = proc.wait(timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            code = None
        self.kill()
        return code


def _exit_text(code: int | None) -> str:
    """``exit status 3``, or ``killed by SIGXCPU`` for a process a signal ended."""
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"
