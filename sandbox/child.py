"""The worker process's main (``python -m sandbox.child``): serve jobs from the parent's socket.

It loads its handler (``--handler module:factory``: :class:`sandbox.gpu_handler.GpuHandler`,
:class:`CompileHandler`, ``sandbox.torch_eval:TorchHandler``), confines a compile worker before
its first job (:mod:`sandbox.confine`), answers each job with one reply, and exits with its parent.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import logging
import os
import resource
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from multiprocessing.connection import Connection

from sandbox.compiler import SHIM_INCLUDE, compile_cuda, cuda_include_dirs, nvrtc_library_dirs
from sandbox.confine import CompileLimits, limit_cpu_for_next_job, limit_memory, restrict
from sandbox.contract import Status
from sandbox.wire import DEFAULT_HANDLER, CompileJob, Handler, Job, Reply, decode_job, encode, failed_reply

log = logging.getLogger(__name__)


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
        cause = f"{exc.name or backend} is not installed in this Python"
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
    parser = argparse.ArgumentParser(prog="python -m sandbox.child")
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
                failed_reply(job, Status.CRASH, f"worker error: {type(exc).__name__}: {exc}"), restart=True
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
    sys.exit(main())
