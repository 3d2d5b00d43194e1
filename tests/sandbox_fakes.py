"""Worker handlers for lifecycle tests: no GPU, behaviour chosen by the candidate's id.

Loaded inside spawned worker processes through ``LocalExecutor(handler="sandbox_fakes:...")``
(the tests directory is on the worker's ``PYTHONPATH``, inherited from pytest's ``sys.path``).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from sandbox.contract import (
    ArgSpec,
    Budget,
    Candidate,
    CandidateResult,
    DeviceInfo,
    EvalRequest,
    EvalResult,
    KernelSource,
    Launch,
    Problem,
    Status,
    Timing,
)
from sandbox.executor import Executor, ExecutorError, ProgressFn, WorkerUnavailable
from sandbox.remote import cancelled_result
from sandbox.testing import FakeExecutor
from sandbox.wire import EvalJob, InfoJob, Job, Reply

FAKE_DEVICE = DeviceInfo(
    name="Fake GPU", compute_capability="9.0", sm_count=4, l2_bytes=1 << 20, memory_bytes=1 << 30
)


class ScriptedHandler:
    """``ok*`` answers ok with the worker's pid; ``hang`` sleeps forever after starting a
    grandchild whose pid it writes to ``<request id>`` (when that is an absolute path); ``crash`` dies; ``sticky`` reports a
    sticky CUDA error and asks for a restart; ``net`` lists the network interfaces it can see;
    ``peek`` says what of the host it can read (/etc/shadow, the environment of the process whose
    pid is the request id, a token in its own environment);
    ``gadget`` writes a pickle that would create the file ``<request id>`` straight into the pipe to
    the parent, as code that took the worker over could, and then hangs."""

    def __init__(self, device: int, backend: str) -> None:
        self.device = device

    def __call__(self, job: Job) -> Reply:
        if isinstance(job, InfoJob):
            known = job.known
            if known is None:
                return Reply(FAKE_DEVICE)
            return Reply(
                DeviceInfo(**{**known.__dict__, "peak_bandwidth_gbps": 1000.0, "peak_gflops": 500.0})
            )
        assert isinstance(job, EvalJob)
        cid = "baseline" if job.index < 0 else job.request.candidates[job.index].id
        if cid == "hang":
            child = subprocess.Popen(["sleep", "600"])
            if os.path.isabs(job.request.id):  # a test that wants the pid names a file for it
                with contextlib.suppress(OSError):  # inside bwrap the test's /tmp is not visible
                    Path(job.request.id).write_text(str(child.pid))
            time.sleep(600)
        if cid == "net":
            return Reply(
                CandidateResult(cid, Status.OK, "interfaces " + " ".join(n for _, n in socket.if_nameindex()))
            )
        if cid == "crash":
            os._exit(9)
        if cid == "peek":
            return Reply(CandidateResult(cid, Status.OK, peek(job.request.id)))
        if cid == "gadget":
            fd = int(sys.argv[sys.argv.index("--fd") + 1])
            payload = pickle.dumps(_Gadget(job.request.id))
            os.write(fd, struct.pack("!i", len(payload)) + payload)  # multiprocessing's framing
            time.sleep(600)
        if cid == "sticky":
            return Reply(CandidateResult(cid, Status.CRASH, "CUDA_ERROR_ILLEGAL_ADDRESS"), restart=True)
        timing = Timing(median_ms=1.0, q1_ms=0.9, q3_ms=1.1, min_ms=0.8, samples=10, rel_spread=0.2)
        return Reply(CandidateResult(cid, Status.OK, f"pid {os.getpid()}", timing=timing))


class _Gadget:
    """Unpickling this runs ``open(path, "w")``: a stand-in for any code a pickle can run."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.path, "w"))


def peek(pid: str) -> str:
    """What this process can read that a sandboxed worker must not: ``name=yes/no`` pairs."""
    seen = []
    for name, path in (("shadow", "/etc/shadow"), ("parent_env", f"/proc/{pid}/environ")):
        try:
            Path(path).read_bytes()
            seen.append(f"{name}=yes")
        except OSError:
            seen.append(f"{name}=no")
    token = "yes" if "CUDA_AGENT_TOKEN" in os.environ or "CUDA_AGENT_API_KEY" in os.environ else "no"
    return " ".join([*seen, f"token_env={token}"])


class FasterHandler(ScriptedHandler):
    """As :class:`ScriptedHandler`, and every ``ok`` candidate comes back reliably 2x faster."""

    def __call__(self, job: Job) -> Reply:
        reply = super().__call__(job)
        value = reply.value
        if (
            isinstance(job, EvalJob)
            and job.index >= 0
            and isinstance(value, CandidateResult)
            and value.status == Status.OK
        ):
            faster = replace(value, speedup=2.0, speedup_low=1.9, speedup_high=2.1, pairs=10)
            return replace(reply, value=faster)
        return reply


class NoGpuHandler:
    def __init__(self, device: int, backend: str) -> None:
        raise RuntimeError("CUDA driver not found")


def vadd_problem(n: int, block: int = 256, label: str = "") -> Problem:
    """c = a + b over ``n`` floats, one thread per element, ``block`` threads per block."""
    return Problem(
        label=label or f"n={n}",
        sizes={"n": n},
        args=(
            ArgSpec("a", "in", "float32", n),
            ArgSpec("b", "in", "float32", n),
            ArgSpec("c", "out", "float32", n),
            ArgSpec("n", "scalar", "int32", value=n),
        ),
        launch=Launch(((n + block - 1) // block, 1, 1), (block, 1, 1)),
        bytes_moved=12 * n,
        flops=n,
    )


def kernel_file(path: Path, name: str, options: tuple[str, ...] = ()) -> KernelSource:
    return KernelSource(source=path.read_text(), name=name, options=options, filename=path.name)


def vadd_request(
    baseline: KernelSource,
    candidates: tuple[Candidate, ...],
    sizes: tuple[int, ...] = (1, 4097),
    bench: int = 1 << 16,
    block: int = 256,
    budget: Budget | None = None,
    request_id: str = "req",
) -> EvalRequest:
    return EvalRequest(
        id=request_id,
        baseline=baseline,
        candidates=candidates,
        verify_problems=tuple(vadd_problem(n, block) for n in sizes),
        bench_problem=vadd_problem(bench, block),
        budget=budget or Budget(),
    )


class LostGpuHandler(ScriptedHandler):
    """``ScriptedHandler``, plus: candidate ``lose`` on device 1 kills the worker and the GPU with
    it: a worker for device 1 then cannot start while ``$XDG_CACHE_HOME/gpu1-lost`` exists (the GPU
    fell off the bus; the test gives each run its own cache directory)."""

    def __init__(self, device: int, backend: str) -> None:
        self.lost = Path(os.environ["XDG_CACHE_HOME"]) / "gpu1-lost"
        if device == 1 and self.lost.exists():
            raise RuntimeError("GPU 1 fell off the bus")
        super().__init__(device, backend)

    def __call__(self, job: Job) -> Reply:
        lose = isinstance(job, EvalJob) and job.index >= 0 and job.request.candidates[job.index].id == "lose"
        if lose and self.device == 1:
            self.lost.write_text("lost")
            os._exit(9)
        return super().__call__(job)


class FakeGpu(Executor):
    """One simulated GPU for scheduler tests: ``FakeExecutor`` verdicts (every changed candidate
    2x faster), ``delay_s`` per request, results stamped with ``index``.  Logs every request it
    starts (``log``: shared by the GPUs of a test) and whether two ever overlapped on it; from its
    ``fail_at``-th request on (1-based) it raises ``error`` as a lost GPU would."""

    def __init__(
        self,
        index: int,
        log: list[tuple[int, str, str]],
        *,
        delay_s: float = 0.0,
        fail_at: int = 0,
        error: type[ExecutorError] = WorkerUnavailable,
    ) -> None:
        self.index, self.log, self.delay_s = index, log, delay_s
        self.fail_at, self.error = fail_at, error
        self.fake = FakeExecutor()
        self.calls = 0
        self.overlapped = False
        self._busy = threading.Lock()
        self.closed = False

    def device_info(self) -> DeviceInfo:
        return replace(FakeExecutor().device_info(), index=self.index)

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        if not self._busy.acquire(blocking=False):
            self.overlapped = True
            self._busy.acquire()
        try:
            self.calls += 1
            self.log.append((self.index, request.id, request.baseline.source))
            if self.fail_at and self.calls >= self.fail_at:
                raise self.error(f"CUDA_ERROR_DEVICE_UNAVAILABLE on fake GPU {self.index}")
            if cancel is not None and cancel.wait(self.delay_s):
                return cancelled_result(request, "cancelled")
            if cancel is None:
                time.sleep(self.delay_s)
            result = self.fake.evaluate(request, progress=progress, cancel=cancel)
            assert result.device is not None
            return replace(result, device=replace(result.device, index=self.index))
        finally:
            self._busy.release()

    def close(self) -> None:
        self.closed = True


HANGING_SANITIZER = (
    "#!/bin/sh\n# Stands in for a compute-sanitizer run that takes far too long.\nexec sleep 601\n"
)


def fake_sanitizer(directory: Path, script: str) -> Path:
    """A ``compute-sanitizer`` running ``script`` in ``directory/bin``; returns that folder (for PATH)."""
    tool = directory / "bin" / "compute-sanitizer"
    tool.parent.mkdir(exist_ok=True)
    tool.write_text(script)
    tool.chmod(0o755)
    return tool.parent


class HostRuntime:
    """A :class:`~sandbox.runtime.Runtime` on host memory, for the verifier without a GPU: device
    pointers are addresses in numpy buffers, a kernel is a Python function of (runtime, args),
    launches run at once and are counted per kernel (``launches``)."""

    def __init__(self) -> None:
        self.buffers: dict[int, np.ndarray] = {}
        self.launches: dict[str, int] = {}
        self._next = 1 << 20

    def alloc(self, nbytes: int) -> int:
        ptr = self._next
        self.buffers[ptr] = np.zeros(nbytes, dtype=np.uint8)
        self._next += (nbytes + 4095) // 4096 * 4096 + 4096
        return ptr

    def free(self, ptr: int) -> None:
        del self.buffers[ptr]

    def array_module(self) -> None:  # no device arrays: verification on the host
        return None

    def view(self, ptr: int, nbytes: int) -> np.ndarray:
        base = max(b for b in self.buffers if b <= ptr)
        return self.buffers[base][ptr - base : ptr - base + nbytes]

    def array(self, ptr: int, dtype: str, count: int) -> np.ndarray:
        return self.view(ptr, count * np.dtype(dtype).itemsize).view(dtype)

    def htod(self, ptr: int, host: np.ndarray) -> None:
        raw = np.ascontiguousarray(host).view(np.uint8).reshape(-1)
        self.view(ptr, raw.size)[:] = raw

    def dtoh(self, ptr: int, nbytes: int) -> np.ndarray:
        return self.view(ptr, nbytes).copy()

    def memset_async(self, ptr: int, byte: int, nbytes: int) -> None:
        self.view(ptr, nbytes)[:] = byte

    def copy_async(self, dst: int, src: int, nbytes: int) -> None:
        self.view(dst, nbytes)[:] = self.view(src, nbytes)

    def synchronize(self) -> None:
        pass

    def launch(self, kernel: Any, launch: Launch, args: Sequence[Any]) -> None:
        self.launches[kernel.__name__] = self.launches.get(kernel.__name__, 0) + 1
        kernel(self, args)
