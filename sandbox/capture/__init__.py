"""Capture kernel launches from a run of the user's own program (``cuda-agent capture``).

The program runs as the user would run it (a C++ binary, ``python train.py``, a test), on this
machine's GPU, with a CUPTI injection library (``inject.cpp``, built on demand with the system C++
compiler against the headers and library of the ``nvidia-cuda-cupti`` wheel or a CUDA toolkit's
CUPTI) loaded through ``CUDA_INJECTION64_PATH``: the driver loads it into the program, statically
linked cudart included.  It writes one JSON line per recorded launch; :func:`parse_records` turns
them into :class:`RecordedLaunch` values (the one contract between the library and Python).

This module only runs what the user asked to run, with the user's rights: it is the user's
program, not untrusted input (see ARCHITECTURE.md, threat model).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from base.errors import Unavailable

SOURCE = Path(__file__).with_name("inject.cpp")
LIBRARY_NAME = "libcuda_agent_capture.so"


class CaptureError(Unavailable, RuntimeError):
    """Capture could not run (no compiler, no CUPTI, the program not found...): one line, with the way out."""


# ---------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Pointer:
    """Where a pointer parameter points: its allocation, and the region of it the launch owns
    (from the pointer, or the allocation's base for the lowest pointer into it, to the next pointer
    into the same allocation or the allocation's end).  ``offset``: bytes from the region's start to
    the pointer.  ``before``/``after``: hashes of the region around the launch ("" when not read)."""

    value: int
    base: int
    alloc_size: int
    region_start: int
    region_size: int
    offset: int
    before: str = ""
    after: str = ""
    saved: str = ""  # file name (in the save folder) of the region's contents before the launch

    @property
    def written(self) -> bool | None:
        """Whether the launch changed the region (None: not read)."""
        return None if not self.before or not self.after else self.before != self.after


@dataclass(frozen=True)
class ParamValue:
    """One kernel parameter as launched: its bytes, and its allocation when it is a device pointer."""

    index: int
    offset: int
    size: int
    raw: bytes
    pointer: Pointer | None = None


@dataclass(frozen=True)
class RecordedLaunch:
    """One recorded launch.  ``kernel``: the demangled name (``void scale<float, 4>(float*, int)``,
    or the plain name of an ``extern "C"`` kernel); ``index``: among the launches that matched."""

    index: int
    api: str
    kernel: str
    mangled: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    params: tuple[ParamValue, ...]
    note: str = ""


@dataclass(frozen=True)
class KernelTime:
    """One kernel's launches as the GPU ran them (``times=True``): how many, their summed
    duration (GPU timestamps, every stream and graph launch), the streams they ran on, and the
    same per launch shape (``"gx,gy,gz/bx,by,bz"`` -> (launches, ns))."""

    launches: int
    ns: int
    streams: int = 1
    shapes: Mapping[str, tuple[int, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class CaptureRun:
    """What a run produced: the recorded launches, every matching kernel with its launch count,
    the library's errors, the program's exit status and wall time; with ``times``, each kernel's
    GPU time and the span from the first kernel's start to the last one's end; with
    ``capture_stdout``, what the program wrote to its standard output."""

    launches: tuple[RecordedLaunch, ...]
    kernels: Mapping[str, int] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    returncode: int = 0
    seconds: float = 0.0
    save_dir: str = ""
    times: Mapping[str, KernelTime] = field(default_factory=dict)
    span_ns: int = 0
    stdout: bytes = b""
    # saved inputs already put in a recorded store (:mod:`sandbox.recorded`), by file name in
    # ``save_dir``: their digests (a remote worker's store: the bytes stay there)
    stored: Mapping[str, str] = field(default_factory=dict)

    @property
    def gpu_ns(self) -> int:
        """The kernels' summed GPU time (kernels overlapping on several streams count each)."""
        return sum(t.ns for t in self.times.values())


def parse_records(lines: Iterable[str]) -> tuple[tuple[RecordedLaunch, ...], dict[str, int], tuple[str, ...]]:
    """The launches, the summary's kernel counts and the errors in the library's JSON lines (a line
    cut short by a crash is skipped)."""
    launches, kernels, errors, _, _ = parse_all(lines)
    return launches, kernels, errors


def parse_all(
    lines: Iterable[str],
) -> tuple[tuple[RecordedLaunch, ...], dict[str, int], tuple[str, ...], dict[str, KernelTime], int]:
    """:func:`parse_records`, and the summary's kernel times and span (empty, 0: not timed)."""
    launches: list[RecordedLaunch] = []
    kernels: dict[str, int] = {}
    errors: list[str] = []
    times: dict[str, KernelTime] = {}
    span = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue
        event = rec.get("event")
        if event == "launch":
            launches.append(_launch(rec))
        elif event == "summary":
            kernels = {str(k): int(v) for k, v in rec.get("kernels", {}).items()}
            times = {str(k): _time(v) for k, v in rec.get("times", {}).items()}
            span = int(rec.get("span_ns", 0))
        elif event == "error":
            errors.append(str(rec.get("message", "")))
    return tuple(launches), kernels, tuple(errors), times, span


def _time(rec: dict[str, Any]) -> KernelTime:
    shapes = {str(k): (int(v[0]), int(v[1])) for k, v in rec.get("shapes", {}).items()}
    return KernelTime(int(rec["launches"]), int(rec["ns"]), int(rec.get("streams", 1)), shapes)


def _launch(rec: dict[str, Any]) -> RecordedLaunch:
    params = []
    for p in rec.get("params", ()):
        ptr = p.get("pointer")
        pointer = (
            Pointer(
                value=int(ptr["value"]),
                base=int(ptr["base"]),
                alloc_size=int(ptr["alloc_size"]),
                region_start=int(ptr["region_start"]),
                region_size=int(ptr["region_size"]),
                offset=int(ptr["offset"]),
                before=str(ptr.get("before", "")),
                after=str(ptr.get("after", "")),
                saved=str(ptr.get("saved", "")),
            )
            if ptr
            else None
        )
        params.append(
            ParamValue(int(p["index"]), int(p["offset"]), int(p["size"]), bytes.fromhex(p["hex"]), pointer)
        )
    grid = tuple(int(x) for x in rec["grid"])
    block = tuple(int(x) for x in rec["block"])
    return RecordedLaunch(
        index=int(rec["index"]),
        api=str(rec.get("api", "")),
        kernel=str(rec["kernel"]),
        mangled=str(rec.get("mangled", "")),
        grid=(grid[0], grid[1], grid[2]),
        block=(block[0], block[1], block[2]),
        smem=int(rec.get("smem", 0)),
        params=tuple(params),
        note=str(rec.get("note", "")),
    )


# ---------------------------------------------------------------------------------------- building


@dataclass(frozen=True)
class Toolchain:
    """What the injection library is built with: a C++ compiler, CUPTI's headers and library folder,
    and CUDA's headers (``cuda.h`` and the types it uses)."""

    compiler: str
    cupti_include: str
    cupti_lib: str
    cupti_soname: str
    cuda_include: str


def _cupti_roots() -> list[Path]:
    roots: list[Path] = []
    if env := os.environ.get("CUDA_AGENT_CUPTI_DIR"):
        roots.append(Path(env))
    try:
        import nvidia  # the namespace package of NVIDIA's wheels

        for base in nvidia.__path__:
            roots += [Path(base) / "cu13", Path(base) / "cu12", Path(base) / "cuda_cupti"]
    except ImportError:
        pass
    for home in _cuda_homes():
        roots += [home / "extras" / "CUPTI", home]
    return roots


def _cuda_homes() -> list[Path]:
    homes = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    if nvcc := shutil.which("nvcc"):
        homes.append(Path(nvcc).resolve().parent.parent)
    return [*homes, Path("/usr/local/cuda")]


def toolchain() -> Toolchain:
    """Find the compiler, CUPTI and CUDA's headers; :class:`CaptureError` says what is missing."""
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not compiler:
        raise CaptureError("no C++ compiler found (install g++, or set CXX) to build the capture library")
    cupti: tuple[Path, Path, str] | None = None
    for root in _cupti_roots():
        inc = root / "include"
        if not (inc / "cupti_callbacks.h").is_file():
            continue
        for lib in (root / "lib", root / "lib64"):
            sonames = sorted(lib.glob("libcupti.so*")) if lib.is_dir() else []
            if sonames:
                cupti = (inc, lib, sonames[-1].name)
                break
        if cupti:
            break
    if cupti is None:
        raise CaptureError(
            "CUPTI not found: pip install nvidia-cuda-cupti (or set CUDA_AGENT_CUPTI_DIR to a folder "
            "with include/cupti_callbacks.h and lib/libcupti.so*)"
        )
    cuda_include = None
    for d in [cupti[0], *(h / "include" for h in _cuda_homes())]:
        if (d / "cuda.h").is_file() and (d / "crt" / "host_defines.h").is_file():
            cuda_include = d
            break
    if cuda_include is None:
        raise CaptureError("CUDA's headers (cuda.h) not found: install a CUDA toolkit or set CUDA_HOME")
    return Toolchain(compiler, str(cupti[0]), str(cupti[1]), cupti[2], str(cuda_include))


def compile_command(tc: Toolchain, output: Path) -> list[str]:
    return [
        tc.compiler,
        "-std=c++17",
        "-O2",
        "-fPIC",
        "-shared",
        "-Wall",
        "-Wno-deprecated-declarations",
        f"-I{tc.cupti_include}",
        f"-I{tc.cuda_include}",
        str(SOURCE),
        "-o",
        str(output),
        f"-L{tc.cupti_lib}",
        f"-l:{tc.cupti_soname}",
        f"-Wl,-rpath,{tc.cupti_lib}",
        "-ldl",
    ]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cuda-agent" / "capture"


def build_library(where: Path | None = None, tc: Toolchain | None = None) -> Path:
    """The injection library, built once per (source, toolchain) into the cache (or ``where``)."""
    tc = tc or toolchain()
    key = hashlib.sha256(SOURCE.read_bytes() + repr(tc).encode()).hexdigest()[:16]
    folder = (where or cache_dir()) / key
    lib = folder / LIBRARY_NAME
    if lib.is_file():
        return lib
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".build-", suffix=".so")
    os.close(fd)
    try:
        done = subprocess.run(compile_command(tc, Path(tmp)), capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            first = next((ln for ln in done.stderr.splitlines() if "error" in ln), done.stderr.strip()[:300])
            raise CaptureError(f"building the capture library failed: {first}")
        os.replace(tmp, lib)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return lib


# ---------------------------------------------------------------------------------------- running


SAVE_CAP_BYTES = 256 << 20  # a recorded launch's saved regions, in all (larger ones are not saved)


def run_program(
    argv: Sequence[str],
    *,
    kernel: str | None = None,
    launch: int | None = None,
    max_launches: int = 8,
    save_dir: str | None = None,
    save_cap_bytes: int = SAVE_CAP_BYTES,
    library: Path | None = None,
    timeout: float | None = None,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    interactive: bool = True,
    cancel: threading.Event | None = None,
    times: bool = False,
    capture_stdout: bool = False,
    watch: bool = True,
    scratch_dir: str | None = None,
) -> CaptureRun:
    """Run ``argv`` with the injection library and read what it recorded.  ``kernel``: a regular
    expression searched in the demangled name; ``launch``: record only that matching launch
    (0-based); ``save_dir``: save the recorded launch's input regions there (``save_cap_bytes``
    in all).  The program's output goes to this process's stderr.  ``CUDA_AGENT_CAPTURE_LIBRARY``
    names a library built beforehand (no compiler needed here).  ``interactive=False``: the program
    reads no input (stdin is /dev/null: a language server's stdin is its protocol stream);
    ``cancel``: when set, the program is stopped and :class:`CaptureError` says so.  ``times``:
    time every matching launch on the GPU (``max_launches=0``: record none, so the program runs
    unsynchronized); ``capture_stdout``: keep the program's standard output (``CaptureRun.stdout``);
    ``watch=False``: run it plainly, without the library (its own wall time and output only);
    ``scratch_dir``: where the library's records are written (default: a temporary folder; a
    confined program can write only its own folder)."""
    if not argv:
        raise CaptureError("no program given: cuda-agent capture -- PROGRAM [ARGS]")
    if shutil.which(argv[0]) is None and not Path(cwd or ".", argv[0]).exists():
        raise CaptureError(f"{argv[0]}: program not found")
    if save_dir:
        try:
            Path(save_dir).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CaptureError(
                f"{save_dir}: cannot create the folder for the inputs ({exc.strerror or exc})"
            ) from None
    prebuilt = os.environ.get("CUDA_AGENT_CAPTURE_LIBRARY")  # a library built elsewhere, as is
    lib = library or (Path(prebuilt) if prebuilt else build_library()) if watch else None
    with tempfile.TemporaryDirectory(prefix="cuda-agent-capture-", dir=scratch_dir) as tmp:
        out = Path(tmp) / "launches.jsonl"
        run_env = dict(os.environ if env is None else env)
        if lib is not None:  # else a plain run
            run_env.update(
                CUDA_INJECTION64_PATH=str(lib),
                CUDA_AGENT_CAPTURE_OUT=str(out),
                CUDA_AGENT_CAPTURE_MAX=str(max_launches),
                CUDA_AGENT_CAPTURE_SAVE_CAP=str(save_cap_bytes),
            )
        if kernel:
            run_env["CUDA_AGENT_CAPTURE_KERNEL"] = kernel
        if launch is not None:
            run_env["CUDA_AGENT_CAPTURE_LAUNCH"] = str(launch)
        if times:
            run_env["CUDA_AGENT_CAPTURE_TIMES"] = "1"
        if save_dir:
            run_env["CUDA_AGENT_CAPTURE_SAVE"] = str(Path(save_dir).resolve())
        stdout_path = Path(tmp) / "stdout"
        with open(stdout_path, "wb") as kept:
            sink: Any
            if capture_stdout:
                sink = kept
            else:
                try:
                    sink = sys.stderr.fileno()  # the program's output never mixes with ours
                except (AttributeError, OSError, ValueError):
                    sink = None
            start = time.perf_counter()
            try:
                proc = subprocess.Popen(
                    list(argv),
                    env=run_env,
                    cwd=cwd,
                    stdin=None if interactive else subprocess.DEVNULL,
                    stdout=sink,
                    start_new_session=not interactive,  # a group of its own: stopped whole
                )
            except OSError as exc:
                raise CaptureError(f"{argv[0]}: cannot run ({exc.strerror})") from exc
            returncode = wait_or_stop(proc, argv[0], timeout, cancel)
            seconds = time.perf_counter() - start
        text = out.read_text(errors="replace") if out.exists() else ""
        stdout = stdout_path.read_bytes() if capture_stdout else b""
    launches, kernels, errors, kernel_times, span = parse_all(text.splitlines())
    if not text and watch:
        errors = (
            "the capture library was not loaded (no CUDA call in the program, or the driver "
            "ignored CUDA_INJECTION64_PATH)",
        )
    return CaptureRun(
        launches, kernels, errors, returncode, seconds, save_dir or "", kernel_times, span, stdout
    )


CANCEL_POLL_S = 0.1  # how often a cancellable run looks at its cancel event


def wait_or_stop(
    proc: subprocess.Popen[Any], name: str, timeout: float | None, cancel: threading.Event | None
) -> int:
    """``proc``'s exit status; :class:`CaptureError` when it runs past ``timeout`` or ``cancel`` is
    set, once it is stopped: killed, with every process of its group when it leads one (started
    with ``start_new_session``: a build's compilers, a program's children), and reaped."""
    try:
        return _wait(proc, name, timeout, cancel)
    finally:
        if proc.poll() is None:
            if os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
            proc.wait()


def _wait(
    proc: subprocess.Popen[Any], name: str, timeout: float | None, cancel: threading.Event | None
) -> int:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if cancel is not None and cancel.is_set():
            raise CaptureError(f"{name}: cancelled")
        left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
        step = CANCEL_POLL_S if cancel is not None else None
        wait = left if step is None else step if left is None else min(left, step)
        try:
            return proc.wait(wait)
        except subprocess.TimeoutExpired:
            if deadline is not None and time.monotonic() >= deadline:
                raise CaptureError(f"{name} did not finish within {timeout:g} s") from None
