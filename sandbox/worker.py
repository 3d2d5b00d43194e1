"""LocalExecutor: evaluate candidates in a spawned worker process per GPU.

Parent side (:class:`LocalExecutor`, :class:`WorkerProcess`): compiles baseline and candidates in
``sandbox.compiler.CompilePool`` (CPU processes, overlapping GPU work), rejects what can be
rejected statically, and sends each candidate to the GPU worker with a deadline.  The worker is a
fresh interpreter (``python -m sandbox.worker``) started with a clean environment, in its own
session and process group, with stdout sent to /dev/null; jobs and replies travel as JSON (never
pickles: a worker that untrusted code took over can send the parent nothing but data, and a reply
that does not decode to the result the job expects is that job's ``crash`` and restarts the worker)
over a private socket pair.  Inside ``bwrap`` (bubblewrap) when it is installed and works: read-only
root with the users' homes and password hashes hidden, private /tmp and /proc, no network.  A job past its deadline gets the whole process group killed and
comes back ``timeout``; a worker that dies comes back ``crash``; after a sticky CUDA error the
worker answers ``crash`` and exits; either way a fresh worker is started for the next job.

Worker side (:class:`GpuHandler`): one CUDA context for the worker's life; per request it loads the
baseline, computes reference outputs lazily (``sandbox.verify.Verifier``), verifies each candidate
and times it interleaved with the baseline (``sandbox.timing.bench``), then re-checks the outputs
the timed runs left on every rotated input slot.

PyTorch (KernelBench-format) answers are Python: :meth:`LocalExecutor.evaluate_torch` runs each
in a fresh worker process of its own with ``sandbox.torch_eval:TorchHandler`` (same prefix,
environment, wire and deadline; the process is closed after its one job).

The handler is pluggable (``handler="module:factory"``) so lifecycle tests can run workers that
crash or hang without a GPU.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import contextlib
import ctypes
import functools
import hashlib
import importlib
import json
import logging
import os
import queue
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import cattrs
import numpy as np

from sandbox.compiler import (
    SHIM_INCLUDE,
    Compiled,
    compile_cuda,
    cuda_include_dirs,
    nvrtc_library_dirs,
    resource_limited,
)
from sandbox.confine import CompileLimits, limit_cpu_for_next_job, limit_memory, restrict
from sandbox.contract import (
    Budget,
    CandidateResult,
    ContractError,
    DeviceInfo,
    EvalRequest,
    EvalResult,
    KernelSource,
    Launch,
    Problem,
    Profile,
    Progress,
    RequestError,
    RequestLimits,
    Status,
    TorchCandidateResult,
    TorchRequest,
    TorchResult,
    validate_request,
    validate_torch_request,
)
from sandbox.executor import Executor, ExecutorError, NoGpuError, ProgressFn, WorkerUnavailable
from sandbox.torch_eval import BUILD_ALLOWANCE_S, TORCH_HANDLER, TorchJob
from sandbox.verify import static_rejection

UNSAFE_TORCH_ENV = "CUDA_AGENT_UNSAFE_TORCH"  # "1": PyTorch answers run even without bubblewrap

log = logging.getLogger(__name__)

DEFAULT_HANDLER = "sandbox.worker:GpuHandler"
PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # the directory holding the ``sandbox`` package
_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LD_LIBRARY_PATH", "XDG_CACHE_HOME")
_ENV_KEEP_PREFIX = ("CUDA_", "CUPY_", "NVIDIA_")
# ...but never this project's own settings (CUDA_AGENT_TOKEN, CUDA_AGENT_API_KEY...) or anything
# whose name says it is a credential.
_ENV_DROP = re.compile(r"^CUDA_AGENT_|TOKEN|KEY|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
MAX_MESSAGE_BYTES = 256 << 20  # a reply larger than this is a broken worker
COMPILE_HANDLER = "sandbox.worker:CompileHandler"
SANITIZER_TOOLS = ("memcheck", "racecheck")
CANCEL_POLL_S = 0.05  # how often a running job looks at its cancel event


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True)
class Binary:
    """A compiled kernel: cubin and the (mangled) symbol to launch."""

    cubin: bytes
    symbol: str


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
class Reply:
    value: CandidateResult | DeviceInfo | Compiled | TorchCandidateResult | None
    restart: bool = False  # the worker exits after this reply (sticky CUDA error)
    unavailable: str = ""  # the worker cannot work at all (no GPU, no CuPy): why


Job = EvalJob | InfoJob | CompileJob | TorchJob
Handler = Callable[[Job], Reply]

# --------------------------------------------------------------------------- the wire (JSON)

_wire = cattrs.Converter()
_wire.register_unstructure_hook(bytes, lambda b: base64.b64encode(b).decode("ascii"))
_wire.register_structure_hook(bytes, lambda v, _: base64.b64decode(v, validate=True))
_JOBS: dict[str, type[Any]] = {"eval": EvalJob, "info": InfoJob, "compile": CompileJob, "torch": TorchJob}
_VALUES: dict[str, type[Any]] = {
    "candidate": CandidateResult,
    "device": DeviceInfo,
    "compiled": Compiled,
    "torch": TorchCandidateResult,
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
            "value": None if value is None else _wire.unstructure(value),
            "restart": message.restart,
            "unavailable": message.unavailable,
        }
    else:
        kind = next(k for k, t in _JOBS.items() if isinstance(message, t))
        body = {"job": kind, "body": _wire.unstructure(message)}
    return json.dumps(body, separators=(",", ":")).encode()


def decode_job(data: bytes) -> Job | None:
    """The parent's message (trusted: the parent wrote it)."""
    body = json.loads(data)
    if body is None:
        return None
    job: Job = _wire.structure(body["body"], _JOBS[body["job"]])
    return job


def decode_reply(data: bytes, job: Job) -> Reply:
    """The worker's reply to ``job``, validated: JSON of the value type the job expects (for an
    evaluation, a result for that very candidate).  Raises :class:`ContractError` otherwise."""
    expected = {EvalJob: "candidate", InfoJob: "device", CompileJob: "compiled", TorchJob: "torch"}[type(job)]
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
        value = _wire.structure(body["value"], _VALUES[expected])
    except Exception as exc:  # JSON, shape or types: anything else is not a reply
        raise ContractError(
            f"malformed reply from the worker: {type(exc).__name__}: {str(exc)[:200]}"
        ) from None
    if isinstance(job, EvalJob) and value.candidate_id != _job_id(job):
        raise ContractError(f"the worker answered for {value.candidate_id!r}, not {_job_id(job)!r}")
    if isinstance(job, TorchJob) and value.result.candidate_id != job.candidate.id:
        raise ContractError(
            f"the worker answered for {value.result.candidate_id!r}, not {job.candidate.id!r}"
        )
    return Reply(value, restart, unavailable)


# --------------------------------------------------------------------------- worker process


def _probe(prefix: list[str], code: str) -> bool:
    """True if ``python -c code`` runs under ``prefix`` with the workers' environment."""
    try:
        probe = subprocess.run(
            [*prefix, sys.executable, "-c", code],
            capture_output=True,
            timeout=30,
            env=clean_env(),
            cwd=str(PACKAGE_ROOT),
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if probe.returncode != 0:
        log.warning("bwrap is installed but unusable here (%s)", probe.stderr[-300:])
    return probe.returncode == 0


def _code_paths() -> list[str]:
    """What a worker's interpreter needs to see: the interpreter, its packages, this project."""
    paths = [sys.prefix, sys.exec_prefix, sys.base_prefix, *sys.path, str(PACKAGE_ROOT)]
    paths += os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    return [p for p in dict.fromkeys(os.path.realpath(p) for p in paths if p) if os.path.isdir(p)]


_HIDDEN_DIRS = ("/home", "/root", "/etc/ssh", "/var/lib", "/run/secrets")  # empty inside the worker
_HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")


# the worker's code, and CuPy's libraries where CuPy is installed (importing it loads them; no GPU needed)
_GPU_PROBE = "import importlib.util, sandbox.worker; importlib.util.find_spec('cupy') and __import__('cupy')"


@functools.cache
def bwrap_prefix() -> tuple[str, ...]:
    """bubblewrap prefix for a GPU worker, or () if unusable: no network, read-only root with the
    users' homes, SSH keys, password hashes and the project tree (but its ``sandbox`` package)
    hidden, private /tmp and /proc (the GPU driver needs the rest of the system: /usr,
    /etc/ld.so.cache, /dev/nvidia*, /sys)."""
    exe = shutil.which("bwrap")
    if not exe:
        return ()
    base = [
        exe,
        "--die-with-parent",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-pid",
        "--ro-bind",
        "/",
        "/",
    ]
    base += ["--dev-bind", "/dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    hidden = list(base)
    for d in _HIDDEN_DIRS:
        if os.path.isdir(d):
            hidden += ["--tmpfs", d]
    for f in _HIDDEN_FILES:
        hidden += ["--ro-bind-try", "/dev/null", f]
    tmp = tempfile.gettempdir()
    project = str(PACKAGE_ROOT)
    hidden += ["--tmpfs", project]  # the project tree (settings, tokens someone left there): only its code
    # the interpreter and the code must stay reachable where they live under a hidden folder
    for path in _code_paths():
        if path == project:
            path = str(PACKAGE_ROOT / "sandbox")
        if any(path == d or path.startswith(d + os.sep) for d in (*_HIDDEN_DIRS, tmp, project)):
            hidden += ["--ro-bind", path, path]
    if _probe(hidden, _GPU_PROBE):
        return tuple(hidden)
    log.warning("the GPU worker cannot start with the host's homes hidden; it runs in a plain bwrap")
    for path in _code_paths():  # as before: only what lives under the private /tmp is bound again
        if path.startswith(tmp + os.sep):
            base += ["--ro-bind", path, path]
    return tuple(base) if _probe(base, _GPU_PROBE) else ()


@functools.cache
def compile_bwrap_prefix() -> tuple[str, ...]:
    """bubblewrap prefix for a compile worker, or () if unusable: nothing of the host but the system
    libraries (/usr), the interpreter and its packages, this project, NVRTC and the CUDA headers,
    all read-only; no network, private /proc and /tmp, no /etc, no homes."""
    exe = shutil.which("bwrap")
    if not exe:
        return ()
    prefix = [exe, "--die-with-parent", "--unshare-all", "--new-session", "--clearenv", "--chdir", "/tmp"]
    prefix += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--ro-bind", "/usr", "/usr"]
    for link in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(link):
            prefix += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            prefix += ["--ro-bind", link, link]
    prefix += ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    dirs = [*_code_paths(), *cuda_include_dirs(), *nvrtc_library_dirs()]
    for path in dict.fromkeys(os.path.realpath(d) for d in dirs):
        if not path.startswith("/usr/"):
            prefix += ["--ro-bind", path, path]
    for key, value in clean_env(compile_only=True).items():
        prefix += ["--setenv", key, value]
    ok = _probe(prefix, "from sandbox.compiler import nvrtc_version; nvrtc_version()")
    return tuple(prefix) if ok else ()


def clean_env(compile_only: bool = False) -> dict[str, str]:
    """The environment of a worker: what the interpreter and CUDA need, never a token or a key.
    ``compile_only``: just the interpreter's (a compile worker needs no GPU)."""
    keep = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH") if compile_only else _ENV_KEEP
    prefixes = () if compile_only else _ENV_KEEP_PREFIX
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in keep or k.startswith(prefixes)) and not _ENV_DROP.search(k)
    }
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([str(PACKAGE_ROOT), *(p for p in sys.path if p)]))
    env["PYTHONUNBUFFERED"] = "1"
    if not compile_only:
        env["CUPY_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), "cuda-agent-cupy")
    return env


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
        self.args = list(args)  # more arguments for ``python -m sandbox.worker``
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
            "sandbox.worker",
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
            return _failed(job, Status.CANCELLED, "the worker was closed")
        if self.proc is None or self.proc.poll() is not None:
            self.restart()
        assert self.conn is not None
        deadline = time.monotonic() + timeout
        try:
            self.conn.send_bytes(encode(job))
            while not self.conn.poll(max(0.0, min(deadline - time.monotonic(), CANCEL_POLL_S))):
                if cancel is not None and cancel.is_set():
                    self.kill()
                    return _failed(job, Status.CANCELLED, "cancelled while running")
                if time.monotonic() >= deadline:
                    self.restart()
                    return _failed(job, Status.TIMEOUT, f"killed at its {timeout:.1f} s deadline")
            data = self.conn.recv_bytes(MAX_MESSAGE_BYTES)
        except (EOFError, OSError) as exc:
            code = self.proc.wait(timeout=5) if self.proc else None
            self.restart()
            return _failed(job, Status.CRASH, f"worker died ({_exit_text(code)}): {exc or 'EOF'}")
        try:
            reply = decode_reply(data, job)
        except ContractError as exc:
            log.warning("worker %d: %s", self.device, exc)
            self.restart()
            return _failed(job, Status.CRASH, f"{exc}; the worker was restarted")
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


def _failure(job: Job, status: Status, message: str) -> CandidateResult | TorchCandidateResult | None:
    if isinstance(job, EvalJob):
        return CandidateResult(candidate_id=_job_id(job), status=status, message=message)
    if isinstance(job, TorchJob):
        return TorchCandidateResult(CandidateResult(job.candidate.id, status, message))
    return None


def _failed(job: Job, status: Status, message: str) -> Reply:
    """The reply standing in for one the worker did not give.  A compile job that hung, crashed
    or died (a limit of :mod:`sandbox.confine` ends it so) is that unit's ``resource limit``
    compile error; one that did not run says why."""
    if isinstance(job, CompileJob):
        if status in (Status.TIMEOUT, Status.CRASH):
            return Reply(resource_limited(f"compile {message}"))
        return Reply(None, unavailable=f"compile worker: {message}")
    return Reply(_failure(job, status, message))


def _job_id(job: EvalJob) -> str:
    return "baseline" if job.index < 0 else job.request.candidates[job.index].id


# --------------------------------------------------------------------------- executor


class LocalExecutor(Executor):
    """Evaluates on this machine's GPUs: one worker process per device, one request per worker.
    ``limits``: what one request may ask for (:func:`~sandbox.contract.validate_request`);
    ``compile_limits``: what one compile may use (:class:`~sandbox.confine.CompileLimits`)."""

    def __init__(
        self,
        devices: Sequence[int] = (0,),
        *,
        backend: str = "cupy",
        handler: str = DEFAULT_HANDLER,
        sandbox: bool = True,
        compile_workers: int | None = None,
        limits: RequestLimits | None = None,
        compile_limits: CompileLimits | None = None,
        torch_handler: str = TORCH_HANDLER,
    ) -> None:
        from sandbox.compiler import CompilePool

        self.torch_handler = torch_handler
        self.limits = limits or RequestLimits()

        prefix = bwrap_prefix() if sandbox else ()
        self.sandboxed = bool(prefix)
        self._workers = [WorkerProcess(d, backend, handler, prefix) for d in devices]
        self._idle: queue.Queue[WorkerProcess] = queue.Queue()
        for w in self._workers:
            self._idle.put(w)
        self._pool = CompilePool(compile_workers, sandbox=sandbox, limits=compile_limits)
        self._info: dict[int, DeviceInfo] = {}
        self._info_lock = threading.Lock()

    def device_info(self) -> DeviceInfo:
        known = self._info.get(self._workers[0].device)
        if known is not None:  # no need to wait for a worker that may be busy evaluating
            return known
        worker = self._idle.get()
        try:
            return self._device_info(worker)
        finally:
            self._idle.put(worker)

    def _device_info(self, worker: WorkerProcess) -> DeviceInfo:
        from sandbox.timing import cached_ceilings, store_ceilings

        with self._info_lock:
            if worker.device in self._info:
                return self._info[worker.device]
            if worker.proc is None:
                worker.start()
            bare = self._ask_info(worker, None, 60.0)
            known = cached_ceilings(bare)
            info = known or self._ask_info(worker, bare, 120.0)
            if known is None:
                store_ceilings(info)
            self._info[worker.device] = info
            return info

    @staticmethod
    def _ask_info(worker: WorkerProcess, bare: DeviceInfo | None, timeout: float) -> DeviceInfo:
        reply = worker.call(InfoJob(known=None if bare is None else bare), timeout)
        if reply.unavailable:
            raise NoGpuError(reply.unavailable)
        if not isinstance(reply.value, DeviceInfo):
            raise WorkerUnavailable(f"GPU worker {worker.device} did not describe its device")
        return reply.value

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        try:
            validate_request(request, self.limits)
        except RequestError as exc:
            raise ExecutorError(f"request {request.id[:200]!r} refused: {exc}") from exc
        worker = self._idle.get()
        try:
            if worker.backend != request.options.backend:
                worker.kill()
                worker.backend = request.options.backend
            info = self._device_info(worker)
            parts = [
                _Evaluation(self, worker, info, part, progress, cancel).run()
                for part in split_by_defines(request)
            ]
            return merge_parts(request, parts)
        finally:
            self._idle.put(worker)

    def evaluate_torch(self, request: TorchRequest, *, cancel: threading.Event | None = None) -> TorchResult:
        """Each candidate in a fresh PyTorch worker process (``sandbox.torch_eval``) with the GPU
        workers' isolation, while this executor's GPU worker for the device stays idle."""
        try:
            validate_torch_request(request, self.limits)
        except RequestError as exc:
            raise ExecutorError(f"request {request.id[:200]!r} refused: {exc}") from exc
        if not self.sandboxed and os.environ.get(UNSAFE_TORCH_ENV) != "1":
            # A ModelNew is untrusted Python (and whatever C++ it builds): unlike a CUDA kernel it
            # runs on the host, so it runs only where the worker is inside bubblewrap.
            raise ExecutorError(
                "PyTorch answers run only inside bubblewrap, which is not usable here; on a machine "
                f"that holds nothing to protect, {UNSAFE_TORCH_ENV}=1 runs them without it"
            )
        worker = self._idle.get()
        results: list[TorchCandidateResult] = []
        try:
            info = self._device_info(worker)
            timeout = request.budget.timeout_s + BUILD_ALLOWANCE_S
            for index in range(len(request.candidates)):
                job = TorchJob(request, index)
                if cancel is not None and cancel.is_set():
                    results.append(TorchCandidateResult(CandidateResult(job.candidate.id, Status.CANCELLED)))
                    continue
                proc = WorkerProcess(worker.device, worker.backend, self.torch_handler, worker.prefix)
                try:
                    reply = proc.call(job, timeout, cancel)
                finally:
                    proc.close()
                if reply.unavailable:
                    raise NoGpuError(f"PyTorch worker: {reply.unavailable}")
                if not isinstance(reply.value, TorchCandidateResult):  # a reply decode_reply let through
                    raise WorkerUnavailable("the PyTorch worker sent no verdict")
                results.append(reply.value)
        finally:
            self._idle.put(worker)
        return TorchResult(request.id, tuple(results), info)

    def close(self) -> None:
        for w in self._workers:
            w.close()
        self._pool.close()


def split_by_defines(req: EvalRequest) -> tuple[EvalRequest, ...]:
    """``req`` as one request per distinct set of :attr:`Problem.defines`, each compiling every
    kernel with its ``-DNAME=VALUE`` flags: verify-only parts first, then the part that holds the
    bench problem (timed, sanitized, profiled as asked).  Without defines: ``(req,)``."""
    problems = (*req.verify_problems, req.bench_problem)
    groups: dict[tuple[tuple[str, int], ...], list[int]] = {}
    for i, p in enumerate(problems):
        groups.setdefault(tuple(sorted(p.defines.items())), []).append(i)
    bench_key = tuple(sorted(req.bench_problem.defines.items()))
    if not bench_key and len(groups) == 1:
        return (req,)
    order = [key for key in groups if key != bench_key] + [bench_key]
    parts = []
    for n, key in enumerate(order):
        index = groups[key]
        flags = tuple(f"-D{name}={value}" for name, value in key)
        candidates = tuple(
            replace(
                c,
                kernel=replace(c.kernel, options=(*c.kernel.options, *flags)),
                launches=None if c.launches is None else tuple(c.launches[i] for i in index),
            )
            for c in req.candidates
        )
        timed = n == len(order) - 1
        parts.append(
            replace(
                req,
                id=f"{req.id[:180]}#define{n}",
                baseline=replace(req.baseline, options=(*req.baseline.options, *flags)),
                candidates=candidates,
                verify_problems=tuple(problems[i] for i in index[:-1]),
                bench_problem=problems[index[-1]],
                options=req.options
                if timed
                else replace(req.options, time=False, sanitize=False, profile=False),
            )
        )
    return tuple(parts)


def merge_parts(req: EvalRequest, parts: Sequence[EvalResult]) -> EvalResult:
    """One result for ``req`` from those of its :func:`split_by_defines` parts: per kernel, the
    first part that did not pass (with the checks so far), else the timed part's, with every check."""
    if len(parts) == 1:
        return replace(parts[0], request_id=req.id)

    def merged(results: list[CandidateResult]) -> CandidateResult:
        end = next((k for k, r in enumerate(results) if r.status != Status.OK), len(results) - 1)
        return replace(results[end], checks=tuple(c for r in results[: end + 1] for c in r.checks))

    return EvalResult(
        req.id,
        merged([p.baseline for p in parts]),
        tuple(merged([p.candidates[i] for p in parts]) for i in range(len(req.candidates))),
        parts[-1].device,
    )


def bench_request(
    kernel: KernelSource,
    problem: Problem,
    *,
    seeds: tuple[int, ...] = (1, 2, 3),
    budget: Budget | None = None,
    request_id: str = "",
) -> EvalRequest:
    """The sandbox half of ``cuda-agent bench``: ``kernel`` checked against itself on ``problem``
    (guards, inputs untouched, run-twice determinism, 3 seeds) and timed alone, L2 flushed.
    The result's ``baseline`` holds the timing, GB/s, GFLOP/s and % of the device's ceilings.
    ``request_id``: empty for a fresh one (a worker answers a repeated id from its cache)."""
    return EvalRequest(
        id=request_id or f"bench-{uuid.uuid4().hex}",
        baseline=kernel,
        candidates=(),
        verify_problems=(),
        bench_problem=problem,
        seeds=seeds,
        budget=budget or Budget(),
    )


class _Evaluation:
    """One request on one worker."""

    def __init__(
        self,
        executor: LocalExecutor,
        worker: WorkerProcess,
        info: DeviceInfo,
        request: EvalRequest,
        progress: ProgressFn | None,
        cancel: threading.Event | None,
    ) -> None:
        self.ex, self.worker, self.info, self.request = executor, worker, info, request
        self.progress, self.cancel = progress, cancel or threading.Event()
        self.arch = request.options.arch or "sm_" + info.compute_capability.replace(".", "")
        self.compile_deadline = executor._pool.deadline()  # all of this request's compiles

    def _compile(self, kernel: KernelSource) -> Any:
        return self.ex._pool.submit(
            kernel.source,
            filename=kernel.filename,
            name_expressions=(kernel.name,),
            arch=self.arch,
            options=kernel.options,
            headers=kernel.headers,
            deadline=self.compile_deadline,
        )

    def run(self) -> EvalResult:
        req = self.request
        futures = [self._compile(req.baseline)] + [self._compile(c.kernel) for c in req.candidates]
        total = len(req.candidates) + 1
        budget = req.budget
        started = time.perf_counter()
        base_bin, baseline = self._prepare(futures[0], req.baseline, "baseline", budget.timeout_s)
        if base_bin is not None:
            job = EvalJob(req, base_bin, -1)
            reply = self.worker.call(job, 2 * budget.timeout_s, self.cancel)
            baseline = self._finish(reply, job, started, baseline)
        self._report(1, total, f"baseline: {baseline.status.value}")
        results: list[CandidateResult] = []
        for i, (cand, fut) in enumerate(zip(req.candidates, futures[1:], strict=True)):
            started = time.perf_counter()
            if self.cancel.is_set():
                fut.cancel()
                results.append(CandidateResult(cand.id, Status.CANCELLED, "cancelled"))
            elif base_bin is None or baseline.status != Status.OK:
                fut.cancel()
                results.append(
                    CandidateResult(cand.id, Status.CANCELLED, f"baseline failed: {baseline.message}")
                )
            else:
                binary, result = self._prepare(fut, cand.kernel, cand.id, budget.timeout_s)
                if binary is not None:
                    job = EvalJob(req, base_bin, i, binary)
                    remaining = budget.timeout_s - (time.perf_counter() - started)
                    reply = self.worker.call(job, remaining, self.cancel)
                    result = self._finish(reply, job, started, result)
                    if result.status == Status.OK and req.options.sanitize:
                        result = sanitize(self.worker, job, result, budget, self.cancel)
                    if result.status == Status.OK and req.options.profile:
                        result = replace(result, profile=nsight_profile(self.worker, job, budget))
                results.append(result)
            self._report(i + 2, total, f"{cand.id}: {results[-1].status.value}")
        return EvalResult(req.id, baseline, tuple(results), self.info)

    def _prepare(
        self, fut: Any, kernel: KernelSource, cid: str, timeout: float
    ) -> tuple[Binary | None, CandidateResult]:
        """Wait for a compile (until ``timeout`` or cancel); the binary to run, or None and the
        result that ends this candidate."""
        deadline = time.monotonic() + timeout
        while not fut.done():
            if self.cancel.is_set():
                fut.cancel()
                return None, CandidateResult(cid, Status.CANCELLED, "cancelled while compiling")
            if time.monotonic() >= deadline:
                return None, CandidateResult(cid, Status.TIMEOUT, f"compilation took over {timeout:.0f} s")
            concurrent.futures.wait([fut], timeout=CANCEL_POLL_S)
        try:
            compiled = fut.result()
        except concurrent.futures.CancelledError:
            return None, CandidateResult(cid, Status.CANCELLED, "cancelled while compiling")
        except Exception as exc:  # the compiler process died on this input
            return None, CandidateResult(cid, Status.COMPILE_ERROR, f"compiler failed: {exc}")
        res = compiled.result
        symbol = res.lowered_names.get(kernel.name, kernel.name)
        base = CandidateResult(cid, Status.OK, compile_log=res.log, resources=res.resources.get(symbol))
        if not res.ok:
            return None, replace(base, status=Status.COMPILE_ERROR, message=res.first_error())
        if why := static_rejection(kernel, compiled.binary):
            return None, replace(base, status=Status.REJECTED, message=why)
        return Binary(compiled.binary, symbol), base

    def _finish(
        self, reply: Reply, job: EvalJob, started: float, compiled: CandidateResult
    ) -> CandidateResult:
        if reply.unavailable:
            raise NoGpuError(reply.unavailable)
        result = reply.value
        if not isinstance(result, CandidateResult):
            raise ExecutorError(f"GPU worker answered {type(result).__name__} to an evaluation")
        from sandbox.timing import physics_floor, with_throughput

        result = replace(
            result,
            compile_log=compiled.compile_log,
            resources=compiled.resources,
            seconds=time.perf_counter() - started,
        )
        result = with_throughput(result, job.request.bench_problem, self.info)
        if job.candidate is not None:  # the physics floor (a baseline is what it is)
            result = physics_floor(result, job.request.bench_problem)
        return result

    def _report(self, done: int, total: int, message: str) -> None:
        if self.progress is not None:
            self.progress(Progress(self.request.id, done, total, message))


def sanitize(
    worker: WorkerProcess,
    job: EvalJob,
    result: CandidateResult,
    budget: Budget,
    cancel: threading.Event | None = None,
) -> CandidateResult:
    """Re-run an ``ok`` candidate under compute-sanitizer memcheck and racecheck
    (:func:`sanitizer_request`: alone, on the verification sizes, first seed), checked against
    itself as ``cuda-agent bench`` checks a kernel (guards, inputs untouched, every output written,
    run-twice determinism): its outputs were compared with the original's already, and the
    original's runs under the tools would only add their instrumented time.  Fails closed: the
    result's ``sanitizer`` says ``passed: ...`` only when
    every tool ran to its summary with no error; ``skipped: ...`` without the tool, or when
    ``cancel`` is set before the tools are done (the result is then ``cancelled``: not checked, not
    passed); otherwise ``failed: ...`` and the candidate is ``rejected`` (errors found, or the check
    could not be made)."""
    exe = shutil.which("compute-sanitizer")
    if not exe:
        return replace(result, sanitizer="skipped: compute-sanitizer not found")
    cancel = cancel or threading.Event()
    assert job.candidate is not None
    alone = EvalJob(sanitizer_request(job.request, job.index), job.candidate, -1)
    lines = []
    for tool in SANITIZER_TOOLS:
        if cancel.is_set():
            break
        with tempfile.TemporaryDirectory() as tmp:
            logfile = Path(tmp) / "sanitizer.log"
            prefix = [
                exe,
                "--tool",
                tool,
                "--error-exitcode",
                str(SANITIZER_ERROR),
                "--log-file",
                str(logfile),
            ]
            if worker.prefix:  # inside bwrap, /tmp is private: share the log's directory
                prefix = ["--bind", tmp, tmp, *prefix]
            proc = WorkerProcess(worker.device, worker.backend, worker.handler, [*worker.prefix, *prefix])
            proc.start()
            reply = proc.call(alone, 10 * budget.timeout_s, cancel)
            code = proc.close(timeout=60)
            text = logfile.read_text(errors="replace") if logfile.exists() else ""
        if cancel.is_set():
            break
        passed, line = sanitizer_verdict(tool, code, text, reply)
        lines.append(line)
        if not passed:
            return replace(
                result,
                status=Status.REJECTED,
                message=f"compute-sanitizer {line}",
                sanitizer="failed: " + "; ".join(lines),
            )
    if cancel.is_set():
        done = f" ({'; '.join(lines)})" if lines else ""
        return replace(
            result,
            status=Status.CANCELLED,
            message="cancelled during compute-sanitizer",
            sanitizer=f"skipped: cancelled before every tool ran{done}",
        )
    return replace(result, sanitizer="passed: " + "; ".join(lines))


def sanitizer_request(req: EvalRequest, index: int) -> EvalRequest:
    """The request compute-sanitizer runs for candidate ``index`` of ``req``: the candidate as the
    kernel, alone, untimed, on the first seed and the verification sizes (small and odd, where
    bounds errors show: racecheck over a benchmark-sized matmul takes minutes) with the launches
    the candidate uses there; on the bench problem only when there are no verification sizes."""
    cand = req.candidates[index]
    problems = req.verify_problems or (req.bench_problem,)
    given = cand.launches or ()
    launches = given[: len(req.verify_problems)] or given[-1:]
    if launches:  # one launch per problem
        problems = tuple(replace(p, launch=launch) for p, launch in zip(problems, launches, strict=True))
    return replace(
        req,
        baseline=cand.kernel,
        candidates=(),
        verify_problems=problems[:-1],
        bench_problem=problems[-1],
        seeds=req.seeds[:1],
        options=replace(req.options, time=False, sanitize=False),
    )


def nsight_profile(worker: WorkerProcess, job: EvalJob, budget: Budget) -> Profile:
    """The candidate of ``job`` launched once at the bench problem under Nsight Compute
    (:mod:`sandbox.profile`), in the worker's sandbox; the first seed's inputs."""
    from sandbox.profile import RunnerJob, profile_candidate

    assert job.candidate is not None
    req = job.request
    launches = req.candidates[job.index].launches
    runner = RunnerJob(
        cubin=job.candidate.cubin,
        symbol=job.candidate.symbol,
        problem=req.bench_problem,
        launch=launches[-1] if launches else req.bench_problem.launch,
        seed=req.seeds[0],
        device=worker.device,
        backend=worker.backend,
    )
    return profile_candidate(runner, worker.prefix, clean_env(), str(PACKAGE_ROOT), 4 * budget.timeout_s)


SANITIZER_ERROR = 86  # the exit status compute-sanitizer is told to use when it finds errors


def sanitizer_verdict(tool: str, code: int | None, log_text: str, reply: Reply) -> tuple[bool, str]:
    """(passed, what to say) for one compute-sanitizer run: its exit status, its log, and the reply
    of the worker it ran.  Anything short of a summary with no error and a clean exit is a failure."""
    log_lines = log_text.splitlines()
    summary = next((ln for ln in reversed(log_lines) if "SUMMARY" in ln), "").replace("========= ", "")
    errors = "\n".join([ln for ln in log_lines if ln.startswith("=========") and "SUMMARY" not in ln][:20])
    value = reply.value
    if code == SANITIZER_ERROR:
        return False, f"{tool}: {summary or 'errors found'}" + (f"\n{errors}" if errors else "")
    if reply.unavailable or not isinstance(value, CandidateResult):
        why = reply.unavailable or "no result from the worker under it"
        return False, f"{tool}: could not check: {why} (exit status {code})"
    if value.status != Status.OK:
        return False, f"{tool}: could not check: {value.status.value}: {value.message}"
    if not summary:
        return False, f"{tool}: could not check: no summary in its log (exit status {code})"
    if code != 0:
        return False, f"{tool}: could not check: exit status {code} ({summary})"
    return True, f"{tool}: {summary}"


# --------------------------------------------------------------------------- worker side


HELPERS = r"""
extern "C" __global__ void cuda_agent_scribble(unsigned int pattern, unsigned int words) {
    extern __shared__ unsigned int smem[];
    for (unsigned int i = threadIdx.x; i < words; i += blockDim.x)
        smem[i] = (pattern + blockIdx.x) * 2654435761u ^ (i * 40503u);
}
extern "C" __global__ void cuda_agent_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
extern "C" __global__ void cuda_agent_gate(const volatile int* open, long long max_cycles) {
    long long start = clock64();
    while (*open == 0 && clock64() - start < max_cycles) { }
}
"""
SPIN_CYCLES = 2_000_000
TIMING_SLOTS = 3  # rotated input sets for timing; at least 2 so the rotated re-check means something
LARGE_SLOT = 64 << 20  # bytes of one input set from which timing uses 2 sets


def timing_slots(problem: Problem, cap: int) -> int:
    """How many rotated input sets fit the evaluation's memory cap (baseline and candidate share
    each set; ``inout`` arrays also keep a pristine copy). Large problems use fewer sets: the L2
    flush before every sample already keeps them from being served from cache, and each set
    costs the host a draw of its inputs and the baseline's reference outputs on them (seconds at
    2^26 elements), so sets of ``LARGE_SLOT`` bytes or more use 2."""
    from sandbox.verify import GUARD_BYTES, elem_type

    per_slot = sum(
        (a.count * elem_type(a.dtype).itemsize) * (2 if a.role == "inout" else 1) + 2 * GUARD_BYTES
        for a in problem.args
        if a.role != "scalar"
    )
    if per_slot >= LARGE_SLOT:
        return 2
    if not cap or per_slot == 0:
        return TIMING_SLOTS
    return max(2, min(TIMING_SLOTS, cap // per_slot))


def verification_plan(req: EvalRequest) -> list[tuple[Problem, tuple[int, ...]]]:
    """(problem, seeds) to verify on: every verification size on every seed; the benchmark size on
    the first seed only when the request is timed, as the timed runs use the other seeds' inputs
    too and check the outputs the candidate's timed launches leave on each of them."""
    bench_seeds = req.seeds[:1] if req.options.time else req.seeds
    return [(p, req.seeds) for p in req.verify_problems] + [(req.bench_problem, bench_seeds)]


@contextlib.contextmanager
def gpu_lock(key: str, exclusive: bool) -> Iterator[None]:
    """Hold the device's advisory lock, shared by every worker on the machine (a file in
    /dev/shm, which bubblewrap leaves shared, else the temp directory): verification holds it
    shared, timing exclusive, so no other evaluation's GPU work (another worker, a sanitizer run,
    the verification of the next batch) overlaps a timed sample."""
    import fcntl

    root = Path("/dev/shm") if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    name = "cuda-agent-gpu-" + "".join(c if c.isalnum() else "_" for c in key) + ".lock"
    path = (root or Path(tempfile.gettempdir())) / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:  # no lock to be had: say so, and time anyway
        log.warning("cannot open the GPU lock %s: %s", path, exc)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # releases the lock


class CompileHandler:
    """Serves :class:`CompileJob`s in a compile worker: untrusted compiles, nothing else."""

    def __init__(self, device: int, backend: str) -> None:
        pass

    def __call__(self, job: Job) -> Reply:
        if not isinstance(job, CompileJob):
            return Reply(None, unavailable="a compile worker only compiles")
        return Reply(
            compile_cuda(
                job.source,
                filename=job.filename,
                name_expressions=job.name_expressions,
                arch=job.arch,
                options=job.options,
                headers=job.headers,
            )
        )


class GpuHandler:
    """Serves jobs in the worker process: one CUDA context, state for the latest request."""

    def __init__(self, device: int, backend: str) -> None:
        from sandbox.runtime import make_runtime

        self.rt = make_runtime(backend, device)
        self.info = self.rt.device_info()
        self.key = self.rt.device_key() or f"index{device}"
        self._helpers: dict[str, Any] = {}
        self._state: tuple[str, Any, Any] | None = None  # request key, baseline handle, verifier
        self._flusher: Any = None
        self._gate: Any = None
        self._scribbles = 0
        from sandbox.verify import DEVICE_MIN_BYTES

        # verification on the device (CuPy backend) for problems of at least device_min_bytes,
        # unless device_verify is false: the host path, the oracle of the differential tests and
        # the "before" of bench/verify_cost.py
        self.device_verify = True
        self.device_min_bytes = DEVICE_MIN_BYTES

    def __call__(self, job: Job) -> Reply:
        from sandbox.runtime import CudaError, MemoryCapExceeded

        if isinstance(job, InfoJob):
            return Reply(self.describe(job.known))
        if isinstance(job, CompileJob | TorchJob):
            return Reply(None, unavailable="a CUDA GPU worker neither compiles nor runs PyTorch jobs")
        try:
            return Reply(self.evaluate(job))
        except MemoryCapExceeded as exc:
            return Reply(_failure(job, Status.LAUNCH_ERROR, str(exc)))
        except CudaError as exc:
            status = Status.CRASH if exc.sticky else Status.LAUNCH_ERROR
            return Reply(_failure(job, status, str(exc)), restart=exc.sticky)

    def describe(self, known: DeviceInfo | None) -> DeviceInfo:
        if known is None:
            return self.info
        from sandbox.timing import measure_ceilings

        bandwidth, gflops, tensor = measure_ceilings(self.rt)
        return replace(known, peak_bandwidth_gbps=bandwidth, peak_gflops=gflops, peak_tensor_gflops=tensor)

    def _helper(self, name: str) -> Any:
        if name not in self._helpers:
            from sandbox.compiler import compile_cuda

            arch = "sm_" + self.info.compute_capability.replace(".", "")
            compiled = compile_cuda(HELPERS, filename="cuda_agent_helpers.cu", arch=arch)
            if not compiled.result.ok:
                raise RuntimeError(f"helper kernels failed to compile: {compiled.result.log}")
            self._helpers[name] = self.rt.load(compiled.binary, name)
        return self._helpers[name]

    def scribble(self, pattern: int) -> None:
        """Fill the shared memory of every SM with a pattern that changes on every call."""
        self._scribbles += 1
        optin = self.rt.max_shared_optin()
        launch = Launch((2 * self.info.sm_count, 1, 1), (256, 1, 1), optin)
        args = (np.uint32((pattern << 16) ^ self._scribbles), np.uint32(optin // 4))
        self.rt.launch(self._helper("cuda_agent_scribble"), launch, args)

    def clock_mhz(self) -> float:
        start, end = self.rt.event(), self.rt.event()
        self.rt.record(start)
        self.rt.launch(
            self._helper("cuda_agent_spin"), Launch((1, 1, 1), (1, 1, 1)), (np.int64(SPIN_CYCLES),)
        )
        self.rt.record(end)
        self.rt.synchronize()
        return SPIN_CYCLES / (self.rt.elapsed_ms(start, end) * 1e3)

    def _request_state(self, job: EvalJob) -> tuple[Any, Any]:
        """The baseline and a verifier for the job's request, kept while requests share the
        baseline, problems, seeds and tolerance (every batch of one optimize run): inputs are
        drawn and reference outputs computed once per run, not once per batch."""
        from sandbox.verify import Verifier

        req = job.request
        plan = verification_plan(req)
        tolerances = (*req.tolerances, *([req.tolerance] if req.tolerance else []))
        state = _wire.unstructure([job.baseline, plan, tolerances])
        key = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()
        if self._state is None or self._state[0] != key:
            self._state = None  # let the old verifier's host arrays go before drawing new ones
            baseline = self.rt.load(job.baseline.cubin, job.baseline.symbol)
            verifier = Verifier(
                self.rt,
                plan,
                baseline,
                tolerances,
                self.scribble,
                lambda: gpu_lock(self.key, exclusive=False),
                device=self.device_verify,
                device_min_bytes=self.device_min_bytes,
            )
            self._state = (key, baseline, verifier)
        return self._state[1], self._state[2]

    def evaluate(self, job: EvalJob) -> CandidateResult:
        from sandbox.verify import allowed_roundoff, lower_precision

        req = job.request
        cid = _job_id(job)
        self.rt.set_memory_limit(0)
        if self._flusher is None:
            from sandbox.timing import Flusher, Gate

            self._flusher = Flusher(self.rt, 2 * max(self.info.l2_bytes, 1 << 20))
            self._gate = Gate(self.rt, self._helper("cuda_agent_gate"))
        self._helper("cuda_agent_scribble")
        self._helper("cuda_agent_spin")
        features: dict[str, str] = {}
        if job.candidate is not None:
            features = lower_precision(req.baseline, req.candidates[job.index].kernel)
        precision = ", ".join(f"{kind} ({evidence})" for kind, evidence in features.items())
        allowed = allowed_roundoff(features, req.allow_precision)
        with gpu_lock(self.key, exclusive=False):
            baseline, verifier = self._request_state(job)
        self.rt.set_memory_limit(req.budget.gpu_memory_bytes)
        try:
            if job.candidate is None:
                kernel, launches = baseline, None
            else:
                kernel = self.rt.load(job.candidate.cubin, job.candidate.symbol)
                launches = req.candidates[job.index].launches
            verdict = verifier.verify(kernel, launches, allowed)  # holds the GPU lock (shared) itself
            if verdict.status is not None:
                result = CandidateResult(cid, verdict.status, verdict.message, checks=verdict.checks)
            elif not req.options.time:
                result = CandidateResult(cid, Status.OK, "verified (not timed)", checks=verdict.checks)
            else:
                bench_launch = launches[-1] if launches else req.bench_problem.launch
                result = self._time(job, baseline, kernel, bench_launch, verifier, verdict.checks, allowed)
            return replace(result, precision=precision)
        finally:
            self.rt.set_memory_limit(0)

    def _time(
        self,
        job: EvalJob,
        baseline: Any,
        kernel: Any,
        launch: Launch,
        verifier: Any,
        checks: Any,
        allowed: float,
    ) -> CandidateResult:
        """Time the kernel (with the baseline, in pairs on shared buffers), then check the outputs
        the candidate's last timed launch left on every rotated input set."""
        from sandbox.timing import bench, paired
        from sandbox.verify import POISON_A, Workspace, compare, constants_for

        req = job.request
        problem = req.bench_problem
        alone = job.candidate is None
        cid = _job_id(job)
        index = len(verifier.problems) - 1
        slots = timing_slots(problem, req.budget.gpu_memory_bytes - self.rt.allocated())
        # the run's seeds, then more: each slot its own inputs; one set of __constant__ data, so
        # where a constant copies an argument (`const c copy(filter)`) every slot holds the
        # first seed's inputs (the constant must equal each slot's copy of that argument)
        seeds = [req.seeds[s] if s < len(req.seeds) else req.seeds[0] + 7919 * s for s in range(slots)]
        if any(c.dist.kind == "copy" for c in problem.constants):
            seeds = [seeds[0]] * slots
        arrays = [a for a in problem.args if a.role in ("out", "inout")]
        spaces: list[Workspace] = []
        pristine: list[dict[str, int]] = []
        try:
            for _ in seeds:
                spaces.append(verifier.workspace(index))
            with gpu_lock(self.key, exclusive=False):
                refs = [] if alone else [verifier.reference(index, s, spaces[0], seeds[0]) for s in seeds]
                for ws, seed in zip(spaces, seeds, strict=True):
                    ws.prepare(verifier.inputs(index, seed), POISON_A)
                    copies = {}
                    for a in arrays:
                        if a.role == "inout":
                            copies[a.name] = self.rt.alloc(ws.nbytes[a.name])
                            self.rt.copy_async(copies[a.name], ws.data(a.name), ws.nbytes[a.name])
                    pristine.append(copies)
                for k in (baseline, kernel):
                    for name, host in constants_for(
                        problem, seeds[0], verifier.inputs(index, seeds[0])
                    ).items():
                        self.rt.htod(self.rt.global_symbol(k, name), host)
                self.rt.synchronize()

            def reset(slot: int) -> None:
                ws = spaces[slot]
                for a in arrays:
                    if a.role == "inout":
                        self.rt.copy_async(ws.data(a.name), pristine[slot][a.name], ws.nbytes[a.name])
                    else:
                        self.rt.memset_async(ws.data(a.name), POISON_A, ws.nbytes[a.name])

            runs = [lambda s: self.rt.launch(baseline, problem.launch, spaces[s].args())]
            if not alone:
                runs.append(lambda s: self.rt.launch(kernel, launch, spaces[s].args()))
            with gpu_lock(self.key, exclusive=True):
                sampled = bench(
                    self.rt, runs, slots, self._flusher, req.budget, self.clock_mhz, reset, self._gate
                )
            with verifier.computing(index):  # on the device: outputs compared where they are
                for slot, ws in enumerate([] if alone else spaces):
                    for a in arrays:
                        ref, moved = refs[slot][a.name]
                        calib = verifier.calibration(index, a.name, moved, allowed)
                        cared = verifier.cared(index, seeds[slot], a.name, seeds[0])
                        cmp = compare(ref, ws.read(a.name), a.dtype, calib, cared)
                        if not cmp.ok:
                            return CandidateResult(
                                cid,
                                Status.MISMATCH,
                                f"{problem.label}: the outputs of the timed runs differ from the baseline's "
                                f"on rotated input set {slot} (`{a.name}` {cmp.detail}): "
                                "results depend on earlier calls",
                                checks=checks,
                            )
        finally:
            for ws in spaces:
                ws.close()
            for copies in pristine:
                for ptr in copies.values():
                    self.rt.free(ptr)
        timings = sampled.timings
        note = "; ".join(n for n in (timing_note(timings, sampled.ratios), verifier.spill_note()) if n)
        if alone:
            return CandidateResult(cid, Status.OK, checks=checks, timing=timings[0], note=note)
        speed, low, high = paired(sampled.ratios)
        return CandidateResult(
            cid,
            Status.OK,
            checks=checks,
            timing=timings[1],
            baseline_timing=timings[0],
            speedup=speed,
            speedup_low=low,
            speedup_high=high,
            pairs=len(sampled.ratios),
            note=note,
        )


def timing_note(timings: Sequence[Any], ratios: Sequence[float]) -> str:
    """What the timing needs said with it: multimodal samples (with their modes), throttling."""
    from sandbox.timing import modes

    notes = []
    for who, t in zip(("baseline", "candidate") if len(timings) == 2 else ("kernel",), timings, strict=True):
        if t.modes:
            notes.append(f"{who} samples are bimodal ({' ms and '.join(f'{m:.4g}' for m in t.modes)} ms)")
    if len(ratios) >= 2 and (ratio_modes := modes(ratios)):
        notes.append(f"paired ratios are bimodal ({' and '.join(f'{m:.3g}x' for m in ratio_modes)})")
    if any(t.throttled for t in timings):
        notes.append("the SM clock dropped while sampling")
    return "; ".join(notes)


def _load_handler(spec: str, device: int, backend: str) -> Handler:
    module, _, name = spec.partition(":")
    factory = getattr(importlib.import_module(module), name)
    handler: Handler = factory(device, backend)
    return handler


def nvidia_driver_present() -> bool:
    """Whether this machine has an NVIDIA driver: its device nodes (``/dev/nvidiactl``,
    ``/dev/nvidia0``...) or its user-space library (``libcuda.so.1``)."""
    if os.path.exists("/dev/nvidiactl") or any(
        n.startswith("nvidia") and n[6:].isdigit() for n in os.listdir("/dev")
    ):
        return True
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def no_gpu_text(exc: BaseException, device: int, backend: str, driver: bool | None = None) -> str:
    """Why GPU ``device`` cannot be used, named by its cause: the GPU library missing, no driver,
    the driver too old, no GPU (the raw error follows).  ``driver``: whether the machine has an
    NVIDIA driver (looked up when None).  CUDA says "driver version is insufficient" also where
    there is no driver at all: only a driver that is there can be too old."""
    text = f"{type(exc).__name__}: {exc}"
    low = text.lower()
    if isinstance(exc, ModuleNotFoundError):
        cause = f"{exc.name or backend} is not installed in this Python (the `gpu` extra: pip install 'cuda-agent[gpu]')"
    elif any(w in low for w in ("insufficient", "libcuda", "no cuda-capable device", "driver")):
        if not (nvidia_driver_present() if driver is None else driver):
            cause = "no NVIDIA driver on this machine (no libcuda.so.1, no /dev/nvidia*)"
        elif "insufficient" in low:
            cause = "the NVIDIA driver is older than the CUDA this CuPy was built for (update the driver, or the `gpu-cuda12` extra)"
        else:
            cause = "the NVIDIA driver finds no GPU"
    else:
        cause = f"GPU {device} cannot be used"
    return f"no usable GPU {device} ({backend}): {cause}; {text}"


def main(argv: Sequence[str] | None = None) -> int:
    """Worker process entry: serve jobs from the inherited socket until it closes."""
    parser = argparse.ArgumentParser(prog="python -m sandbox.worker")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--device", type=int, default=0)
    parser.add_argument("--backend", default="cupy")
    parser.add_argument("--handler", default=DEFAULT_HANDLER)
    parser.add_argument(
        "--landlock", action="store_true", help="confine the compile worker (sandbox.confine)"
    )
    parser.add_argument("--max-memory", type=int, default=0, help="RLIMIT_AS in bytes (0: none)")
    parser.add_argument("--max-cpu-s", type=float, default=0.0, help="CPU seconds per job (0: no limit)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="worker: %(message)s")
    conn = Connection(args.fd)
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), name="parent-watch", daemon=True).start()
    handler: Handler | None = None
    unavailable = ""
    limits = CompileLimits(memory_bytes=args.max_memory, cpu_s=args.max_cpu_s)
    if args.landlock or args.max_memory:
        try:
            handler = _load_handler(args.handler, args.device, args.backend)
            _confine(handler, args.landlock, limits)
        except Exception as exc:  # never serve unconfined what was meant to be confined
            handler, unavailable = None, f"the compile worker could not confine itself: {exc}"
    while True:
        try:
            job = decode_job(conn.recv_bytes())
        except (EOFError, OSError):
            return 0
        if job is None:
            return 0
        if handler is None and not unavailable:
            try:
                handler = _load_handler(args.handler, args.device, args.backend)
            except Exception as exc:  # no CuPy, no driver, no device
                unavailable = no_gpu_text(exc, args.device, args.backend)
        if handler is None:
            if not _send(conn, Reply(None, unavailable=unavailable)):
                return 0
            continue
        if args.max_cpu_s:
            limit_cpu_for_next_job(limits)
        try:
            reply = handler(job)
        except Exception as exc:  # a bug in the harness: report it on this job and start afresh
            log.exception("worker job failed")
            reply = replace(
                _failed(job, Status.CRASH, f"worker error: {type(exc).__name__}: {exc}"), restart=True
            )
        if not _send(conn, reply):
            return 0
        if reply.restart:
            return 3


_WARM_UP = CompileJob("__global__ void warm_up(float* p) { *p = 1.0f; }", "warm_up.cu", (), "sm_90", (), {})


def _confine(handler: Handler, landlock: bool, limits: CompileLimits) -> None:
    """Confine a compile worker before its first job (:mod:`sandbox.confine`): a first compile
    loads NVRTC and every module a job needs; then, with ``landlock``, only the headers, NVRTC,
    the interpreter and the system's libraries stay readable (the working folder: our stand-in
    headers); then the memory cap (``limits.memory_bytes``, if any) and no core files."""
    handler(_WARM_UP)
    os.chdir(SHIM_INCLUDE)
    if landlock:
        system = ("/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/dev/null", "/dev/urandom")
        interpreter = (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)
        restrict([*cuda_include_dirs(), *nvrtc_library_dirs(), *interpreter, *system])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if limits.memory_bytes:
        limit_memory(limits)


def _send(conn: Connection, reply: Reply) -> bool:
    """Send a reply; False when the parent is gone (its end of the socket closed): nobody to tell."""
    try:
        conn.send_bytes(encode(reply))
    except OSError:  # BrokenPipeError, ConnectionResetError
        return False
    return True


PARENT_POLL_S = 0.5


def _exit_with_parent(parent: int) -> None:
    """Exit, quietly and at once, with whatever the job started, when the process that started the
    worker is gone (the worker runs in its own session, so a killed optimizer does not take it
    down): a job in flight has nobody to report to and would only keep the GPU busy."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    if os.getpgrp() == os.getpid():  # its own process group: the job's children are in it
        os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(0)


if __name__ == "__main__":
    # Run the imported module's main, so handlers see ``sandbox.worker.Reply``, not ``__main__.Reply``.
    from sandbox.worker import main as worker_main

    sys.exit(worker_main())
