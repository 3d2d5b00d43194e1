"""Isolation of worker processes from the host: bubblewrap prefixes and a clean environment.

A GPU worker runs inside ``bwrap`` (bubblewrap) when it is installed and works: read-only root
with the users' homes and password hashes hidden, private /tmp and /proc, no network.  A compile
worker sees less still (:func:`compile_bwrap_prefix`); inside the process, :mod:`sandbox.confine`
adds Landlock and resource limits.  A token holder's program on a worker runs in the GPU worker's
bubblewrap with only its own folder writable (:func:`program_prefix`).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sandbox import capture, recorded
from sandbox.compiler import cuda_include_dirs, nvrtc_library_dirs

log = logging.getLogger(__name__)

PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # the directory holding the ``sandbox`` package
WORKER_PACKAGES = ("base", "sandbox")  # all a worker process imports of the project tree
_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LD_LIBRARY_PATH", "XDG_CACHE_HOME")
_ENV_KEEP_PREFIX = ("CUDA_", "CUPY_", "NVIDIA_")
# ...but never this project's own settings (CUDA_AGENT_TOKEN, CUDA_AGENT_API_KEY...) or anything
# whose name says it is a credential.
_ENV_DROP = re.compile(r"^CUDA_AGENT_|TOKEN|KEY|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)


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


_HOMES = ("/home", "/root")  # hidden from a GPU worker whatever else must stay visible
_HIDDEN_DIRS = (*_HOMES, "/etc/ssh", "/var/lib", "/run/secrets")  # empty inside the worker
_HIDDEN_FILES = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")


# the worker's code, and CuPy's libraries where CuPy is installed (importing it loads them; no GPU needed)
_GPU_PROBE = "import importlib.util, sandbox.child; importlib.util.find_spec('cupy') and __import__('cupy')"


def _gpu_prefix(exe: str, hidden_dirs: tuple[str, ...], hide_project: bool) -> list[str]:
    """A bubblewrap prefix for a GPU worker: no network, read-only root with ``hidden_dirs`` and
    the password hashes (and, if ``hide_project``, the project tree but :data:`WORKER_PACKAGES`)
    hidden, private /tmp and /proc; the interpreter and the code bound again where they live under
    a hidden folder."""
    prefix = [exe, "--die-with-parent", "--unshare-net", "--unshare-ipc", "--unshare-pid"]
    prefix += ["--ro-bind", "/", "/", "--dev-bind", "/dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for d in hidden_dirs:
        if os.path.isdir(d):
            prefix += ["--tmpfs", d]
    for f in _HIDDEN_FILES:
        prefix += ["--ro-bind-try", "/dev/null", f]
    project = str(PACKAGE_ROOT)
    if hide_project:  # the project tree (settings, tokens someone left there): only its code
        prefix += ["--tmpfs", project]
    tmp = tempfile.gettempdir()
    covered = (*hidden_dirs, tmp, *((project,) if hide_project else ()))
    for code in _code_paths():
        for path in (
            [str(PACKAGE_ROOT / p) for p in WORKER_PACKAGES] if hide_project and code == project else [code]
        ):
            if any(path == d or path.startswith(d + os.sep) for d in covered):
                prefix += ["--ro-bind", path, path]
    return prefix + _recorded_bind()


@functools.cache
def bwrap_prefix() -> tuple[str, ...]:
    """bubblewrap prefix for a GPU worker, or () if unusable: no network, read-only root with the
    users' homes, SSH keys, password hashes and the project tree (but its ``sandbox`` package)
    hidden, private /tmp and /proc (the GPU driver needs the rest of the system: /usr,
    /etc/ld.so.cache, /dev/nvidia*, /sys).  Where the GPU stack cannot start so, it tries again
    with only the homes (/home, /root) and the password hashes hidden; never with them visible (a
    PyTorch answer runs Python in the worker: it could read any user's files)."""
    exe = shutil.which("bwrap")
    if not exe:
        return ()
    for hidden_dirs, hide_project in ((_HIDDEN_DIRS, True), (_HOMES, False)):
        prefix = _gpu_prefix(exe, hidden_dirs, hide_project)
        if _probe(prefix, _GPU_PROBE):
            return tuple(prefix)
        log.warning("the GPU worker cannot start in bwrap hiding %s", ", ".join(hidden_dirs))
    log.warning("bwrap cannot run the GPU worker with the homes hidden; it runs without bwrap")
    return ()


def program_prefix(folder: Path) -> tuple[str, ...]:
    """bubblewrap prefix for a token holder's program on a worker (``--allow-programs``), or ()
    where bubblewrap is unusable: the GPU worker's (:func:`bwrap_prefix`: no network, the homes,
    keys, password hashes and project tree hidden, private /tmp and /proc) with ``folder`` (the
    request's own) the only place it can write, and the capture library readable."""
    base = bwrap_prefix()
    if not base:
        return ()
    libraries = [
        capture.cache_dir(),
        *(Path(p).parent for p in [os.environ.get("CUDA_AGENT_CAPTURE_LIBRARY")] if p),
    ]
    with contextlib.suppress(OSError):  # built there on a first watched run, after the prefix is made
        libraries[0].mkdir(parents=True, exist_ok=True)
    binds = [arg for lib in libraries for arg in ("--ro-bind-try", str(lib), str(lib))]
    return (*base, *binds, "--bind", str(folder), str(folder))


def _recorded_bind() -> list[str]:
    """The recorded-inputs store (:mod:`sandbox.recorded`), read-only: a request names its data
    by digest, and the worker reads it there, under a hidden home or the private /tmp."""
    store = recorded.store_dir()
    try:
        store.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    return ["--ro-bind", str(store), str(store)]


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
        env["CUDA_AGENT_RECORDED_DIR"] = str(recorded.store_dir())  # where this process puts them
    return env
