"""Confine a compile worker: Landlock (no host view) and resource limits (no host's memory).

A compile worker (``python -m sandbox.child --handler sandbox.child:CompileHandler``) compiles
untrusted source.  Whatever the include scan (:mod:`sandbox.boundary`) misses, the compiler must
not be able to open a host file, so the worker confines itself before its first job:

- **Landlock** (Linux 5.13 or later, ``landlock_create_ruleset``/``landlock_add_rule``/
  ``landlock_restrict_self`` through ``ctypes``): after NVRTC and every module the worker needs
  are loaded, the process keeps read access to the CUDA and CCCL headers, our stand-in headers,
  NVRTC's libraries, the interpreter's own folders and the system's libraries, and nothing
  else: no home, no ``/tmp``, no ``/etc``, no ``/proc`` (so no ``/proc/<parent>/environ``), no
  project tree; no writes anywhere; no TCP (ABI 4 and later); no signals or abstract sockets
  outside itself (ABI 6 and later).  Its working folder is the stand-in headers' folder, so a
  quoted include or ``__has_include`` relative to it finds only those.  It works inside
  bubblewrap too, which :class:`sandbox.compile_pool.CompilePool` uses when it is installed.
- **Resource limits** (:class:`CompileLimits`): ``RLIMIT_DATA`` caps the worker's memory (its
  writable private mappings: heap, anonymous maps, thread stacks; not ``PROT_NONE`` reservations,
  which a CUDA library loaded in the process makes by the gigabyte, so ``RLIMIT_AS`` would starve
  it on a GPU host), a CPU-time
  limit per job (``RLIMIT_CPU``, raised again before each job) ends a compile bomb with
  ``SIGXCPU``; the parent kills a worker busy past ``wall_s`` and refuses a request's compiles
  past ``request_s`` in total.  A compile ended by a limit is that unit's ``compile_error``
  whose message starts with :data:`RESOURCE_LIMIT`.

:func:`landlock_abi` says whether this kernel has Landlock (0: it does not).
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from base.errors import Unavailable

T = TypeVar("T")

RESOURCE_LIMIT = "resource limit"

# syscall numbers: the same on every architecture (added after the numbers were unified)
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
# LANDLOCK_ACCESS_FS_*: execute, write, read file, read dir, then the make/remove rights (ABI 1);
# refer (ABI 2), truncate (ABI 3), ioctl on devices (ABI 5)
_FS_EXECUTE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 2, 1 << 3
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_NET_TCP = 0b11  # bind, connect (ABI 4)
_SCOPES = 0b11  # abstract unix sockets, signals (ABI 6)


@dataclass(frozen=True)
class CompileLimits:
    """What one compile may use.  ``memory_bytes``: the compile worker's data (``RLIMIT_DATA``);
    ``cpu_s``: CPU time per unit; ``wall_s``: wall time per unit (the worker is then killed);
    ``request_s``: wall time of all one request's compiles together."""

    memory_bytes: int = 4 << 30
    cpu_s: float = 60.0
    wall_s: float = 120.0
    request_s: float = 600.0


class ConfinementError(Unavailable, OSError):
    """The process could not be confined (the worker then compiles nothing)."""


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers; 0 when it has none (or it is disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _libc().syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def _fs_rights(abi: int) -> int:
    return _FS_BY_ABI[max(v for v in _FS_BY_ABI if v <= abi)]


def restrict(readable: Iterable[str]) -> None:
    """Confine this process (and every thread it starts later) with Landlock: read (and execute)
    only what lies under ``readable`` (folders or files; missing ones are skipped), write nothing,
    no TCP, no signals out.  Raises :class:`ConfinementError` when the kernel cannot."""
    abi = landlock_abi()
    if abi < 1:
        raise ConfinementError("this kernel has no Landlock (Linux 5.13 or later, with Landlock enabled)")
    libc = _libc()
    fs = _fs_rights(abi)
    fields = [("handled_access_fs", ctypes.c_uint64)]
    values = [fs]
    if abi >= 4:
        fields.append(("handled_access_net", ctypes.c_uint64))
        values.append(_NET_TCP)
    if abi >= 6:
        fields.append(("scoped", ctypes.c_uint64))
        values.append(_SCOPES)
    attr_type = type("RulesetAttr", (ctypes.Structure,), {"_fields_": fields})
    attr = attr_type(*values)
    ruleset = libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    if ruleset < 0:
        raise ConfinementError(
            ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"
        )
    try:
        for path in dict.fromkeys(os.path.realpath(p) for p in readable):
            if path == "/":  # an interpreter installed at the root must not open the whole host
                continue
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rights = _FS_EXECUTE | _FS_READ_FILE
                if os.path.isdir(path):
                    rights |= _FS_READ_DIR
                rule = _PathBeneath(rights, fd)
                if libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
                    err = ctypes.get_errno()
                    raise ConfinementError(err, f"landlock_add_rule({path}): {os.strerror(err)}")
            finally:
                os.close(fd)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            err = ctypes.get_errno()
            raise ConfinementError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(err)}")
        if libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0) != 0:
            err = ctypes.get_errno()
            raise ConfinementError(err, f"landlock_restrict_self: {os.strerror(err)}")
    finally:
        os.close(ruleset)


def limit_memory(limits: CompileLimits) -> None:
    """Cap this process's data (``RLIMIT_DATA``: writable private memory) at ``limits.memory_bytes``."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = limits.memory_bytes if hard == resource.RLIM_INFINITY else min(limits.memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))


def limit_cpu_for_next_job(limits: CompileLimits) -> None:
    """Let this process use ``limits.cpu_s`` more seconds of CPU time, then get ``SIGXCPU``."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = int(used + limits.cpu_s) + 1
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


BIG_STACK_BYTES = 256 << 20  # NVRTC's parser recurses: 3,000 nested parentheses overflow 8 MiB
_STACK_LOCK = threading.Lock()


def on_big_stack(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on a thread with a :data:`BIG_STACK_BYTES` stack; its result or exception."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    with _STACK_LOCK:
        previous = threading.stack_size(BIG_STACK_BYTES)
        try:
            thread = threading.Thread(target=run, name="big-stack")
            thread.start()
        finally:
            threading.stack_size(previous)
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
