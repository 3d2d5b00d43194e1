"""Compile CUDA C++ with NVRTC (cuda-python's ``cuda.bindings.nvrtc``): no GPU or driver needed.

:func:`compile_cuda` turns one translation unit into a cubin (or PTX for a ``compute_XX`` target)
and a :class:`~sandbox.contract.CompileResult`: the log, diagnostics with file/line/column, the
mangled name of each requested name expression (templates included) and ptxas' per-kernel
resource report (registers, spills, shared memory, stack).  Results are cached in memory by a
hash of everything that affects the output.

:class:`sandbox.compile_pool.CompilePool` compiles untrusted units in sandboxed worker processes so compiles overlap GPU
work and each other, a compiler crash on a pathological candidate cannot take the caller down, and
the compile cannot see the host.  Untrusted compiles (the default; requests and LLM output) follow
:mod:`sandbox.boundary`: allowed options only, a plain filename, includes of CUDA's headers and the
unit's own in-memory ``headers`` only.  ``trusted=True`` (``check``, the editor on your own files)
reads your ``-I`` folders and the headers next to the file.

CUDA headers (``cuda_fp16.h``, ``cuda_bf16.h``, vector types...) come from the
``nvidia-cuda-runtime`` and ``nvidia-cuda-cccl`` wheels or a CUDA toolkit, found with ``cuda.pathfinder``.  NVRTC ships no
C standard library, so ``nvrtc_include/`` holds small stand-ins for the headers CUDA code commonly
includes (``<cstdint>``, ``<climits>``, ``<cfloat>``, ``<cmath>``, ``<cstdio>``).
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from base.errors import Unavailable
from sandbox.boundary import DEFAULT_STD, check_untrusted
from sandbox.confine import RESOURCE_LIMIT, on_big_stack
from sandbox.contract import CompileResult, Diagnostic, Resources

SHIM_INCLUDE = Path(__file__).with_name("nvrtc_include")
DEFAULT_OPTIONS = (f"-std={DEFAULT_STD}", "-lineinfo", "--ptxas-options=-v")


@dataclass(frozen=True)
class Compiled:
    result: CompileResult
    binary: bytes = b""  # cubin for sm_XX, PTX text for compute_XX; empty when compilation failed
    ptx: bool = False
    limited: bool = False  # ended by a resource limit (never cached: the limit, not the unit, decided)


class CompilerUnavailable(Unavailable, RuntimeError):
    """NVRTC could not be loaded (cuda-bindings or the nvidia-cuda-nvrtc wheel missing)."""


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """Include directories for CUDA's own headers, plus our standard-library stand-ins."""
    dirs = [str(SHIM_INCLUDE)]
    try:
        from cuda import pathfinder

        for lib in ("cudart", "cccl"):  # cuda_fp16.h & co.; cooperative_groups' <nv/target>, <cuda/std/...>
            found = pathfinder.locate_nvidia_header_directory(lib)
            if found is not None:
                dirs.append(found.abs_path)
    except Exception:  # no headers: kernels that include CUDA headers will report it as an error
        pass
    return tuple(dirs)


@functools.cache
def nvrtc_library_dirs() -> tuple[str, ...]:
    """Folders of the NVRTC libraries this process loads (a sandboxed compile worker must see them)."""
    try:
        from cuda import pathfinder

        found = pathfinder.load_nvidia_dynamic_lib("nvrtc").abs_path
    except Exception:  # no NVRTC: the compile worker reports CompilerUnavailable itself
        return ()
    return (str(Path(found).resolve().parent),) if found else ()


@functools.cache
def nvrtc_version() -> str:
    nvrtc = _nvrtc()
    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def arch_error(arch: str) -> str:
    """Why NVRTC cannot compile for ``arch`` ('' when it can): not a name such as ``sm_90``, or an
    architecture this NVRTC does not support."""
    found = re.fullmatch(r"(sm|compute)_([1-9][0-9]{1,2})[af]?", arch)
    if not found:
        return f"{arch[:40]!r} is not an architecture such as sm_90"
    _, supported = _nvrtc().nvrtcGetSupportedArchs()
    if int(found.group(2)) not in supported:
        names = ", ".join(f"sm_{a}" for a in supported)
        return f"NVRTC {nvrtc_version()} cannot compile for {arch} (it supports {names})"
    return ""


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except Exception as exc:
        raise CompilerUnavailable(f"NVRTC is not available: {exc}") from exc
    return nvrtc


def cache_key(
    source: str,
    filename: str,
    name_expressions: Sequence[str],
    arch: str,
    options: Sequence[str],
    headers: Mapping[str, str] | None = None,
    trusted: bool = False,
) -> str:
    """Everything that affects the output: the unit, its options and headers, the compiler, and
    (trusted compiles only: an untrusted one never reads the host's files) the current contents of
    the headers it includes from the user's include paths."""
    h = hashlib.sha256()
    parts = (source, filename, "\0".join(name_expressions), arch, "\0".join(options), nvrtc_version())
    for part in (*parts, str(trusted), *(f"{k}\0{v}" for k, v in sorted((headers or {}).items()))):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    for _, path, data in _user_headers(source, filename, options) if trusted else ():
        h.update(path.encode("utf-8", "surrogatepass") + b"\x00" + hashlib.sha256(data).digest())
    return h.hexdigest()


_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.MULTILINE)


def _user_headers(source: str, filename: str, options: Sequence[str]) -> list[tuple[str, str, bytes]]:
    """``(name as included, path, contents)`` of the headers ``source`` includes, transitively, from
    its own folder and the ``-I`` folders of ``options`` (CUDA's own headers are covered by the
    NVRTC version).  Trusted compiles only: it reads the host's files."""
    dirs = [Path(filename).resolve().parent] + [
        Path(o[2:]) for o in options if o.startswith("-I") and len(o) > 2
    ]
    found: list[tuple[str, str, bytes]] = []
    seen: set[Path] = set()
    pending = [(source.encode("utf-8", "surrogatepass"), dirs[0])]
    while pending and len(seen) < 256:
        text, here = pending.pop()
        for name in _INCLUDE.findall(text):
            rel = name.decode("utf-8", "replace")
            for d in dict.fromkeys([here, *dirs]):  # next to the includer first, as the preprocessor does
                candidate = d / rel
                if candidate in seen or not candidate.is_file():
                    continue
                seen.add(candidate)
                try:
                    data = candidate.read_bytes()
                except OSError:
                    break
                found.append((rel, str(candidate), data))
                pending.append((data, candidate.parent))
                break
    return found


def carry_headers(
    source: str, filename: str, options: Sequence[str]
) -> tuple[dict[str, str], tuple[str, ...]]:
    """For a trusted client about to send its own unit where it is compiled untrusted (a request):
    the headers the unit includes from its folder and ``-I`` folders, by the name they are included
    with, and ``options`` without the ``-I`` options those headers replace."""
    headers: dict[str, str] = {}
    for name, _, data in _user_headers(source, filename, options):
        headers.setdefault(name, data.decode("utf-8", "replace"))
    return headers, tuple(o for o in options if not o.startswith("-I"))


_CACHE: OrderedDict[str, Compiled] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 512


def cache_get(key: str) -> Compiled | None:
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
        return hit


def cache_put(key: str, value: Compiled) -> None:
    with _CACHE_LOCK:
        _CACHE[key] = value
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)


def compile_cuda(
    source: str,
    *,
    filename: str = "kernel.cu",
    name_expressions: Sequence[str] = (),
    arch: str = "sm_90",
    options: Sequence[str] = (),
    headers: Mapping[str, str] | None = None,
    trusted: bool = False,
) -> Compiled:
    """Compile ``source``; never raises for a bad program (the result says ``ok=False``).

    ``headers``: header name -> text, included by exactly that name (NVRTC's in-memory headers).
    ``trusted``: the source, options and filename are the user's own (``check``, the editor's
    diagnostics), so ``-I`` folders and headers next to ``filename`` are read.  Untrusted (the
    default, for requests and LLM output): :func:`sandbox.boundary.check_untrusted` must pass
    (only CUDA's headers, our stand-ins and ``headers`` can be included), and NVRTC gets no
    include folder but CUDA's and our stand-ins'."""
    key = cache_key(source, filename, name_expressions, arch, options, headers, trusted)
    hit = cache_get(key)
    if hit is not None:
        return replace(hit, result=replace(hit.result, cached=True, seconds=0.0))
    compiled = _compile_uncached(
        source, filename, tuple(name_expressions), arch, tuple(options), dict(headers or {}), trusted
    )
    cache_put(key, compiled)
    return compiled


def refused(why: str) -> Compiled:
    """A compile that did not run because it broke the boundary's rules: an error, no file content."""
    return Compiled(
        CompileResult(
            ok=False, log=why, diagnostics=(Diagnostic(line=0, column=0, severity="error", message=why),)
        )
    )


def resource_limited(why: str) -> Compiled:
    """A compile ended by a :class:`~sandbox.confine.CompileLimits` limit: the unit's compile error."""
    message = f"{RESOURCE_LIMIT}: {why}"
    diagnostic = Diagnostic(line=0, column=0, severity="error", message=message)
    return Compiled(CompileResult(ok=False, log=message, diagnostics=(diagnostic,)), limited=True)


def _compile_uncached(
    source: str,
    filename: str,
    name_expressions: tuple[str, ...],
    arch: str,
    options: tuple[str, ...],
    headers: dict[str, str],
    trusted: bool,
) -> Compiled:
    if not trusted and (
        why := check_untrusted(source, filename, options, headers, arch, cuda_include_dirs())
    ):
        return refused(why)
    nvrtc = _nvrtc()
    # NVRTC's parser recurses: deep nesting would overflow a normal thread's stack (a SIGSEGV)
    return on_big_stack(_run_nvrtc, nvrtc, source, filename, name_expressions, arch, options, headers)


def _run_nvrtc(
    nvrtc: Any,
    source: str,
    filename: str,
    name_expressions: tuple[str, ...],
    arch: str,
    options: tuple[str, ...],
    headers: dict[str, str],
) -> Compiled:
    ok_code = nvrtc.nvrtcResult.NVRTC_SUCCESS
    start = time.perf_counter()
    names = list(headers)
    err, prog = nvrtc.nvrtcCreateProgram(
        source.encode("utf-8", "replace"),
        filename.encode(),
        len(names),
        [headers[k].encode("utf-8", "replace") for k in names],
        [k.encode() for k in names],
    )
    if err != ok_code:
        return Compiled(CompileResult(ok=False, log=f"nvrtcCreateProgram failed: {err}"))
    try:
        for expr in name_expressions:
            (err,) = nvrtc.nvrtcAddNameExpression(prog, expr.encode())
            if err != ok_code:
                return Compiled(
                    CompileResult(ok=False, log=f"invalid kernel name expression {expr!r}: {err}")
                )
        opts = [f"--gpu-architecture={arch}", *DEFAULT_OPTIONS]
        opts += [f"-I{d}" for d in cuda_include_dirs()]
        opts += list(options)
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        log = _program_log(nvrtc, prog)
        diagnostics = parse_diagnostics(log)
        ok = err == ok_code
        binary = b""
        lowered: dict[str, str] = {}
        ptx = arch.startswith("compute_")
        if ok:
            binary = _output(nvrtc, prog, ptx)
            for expr in name_expressions:
                err, name = nvrtc.nvrtcGetLoweredName(prog, expr.encode())
                if err == ok_code:
                    lowered[expr] = name.decode()
        if not ok and (
            err == nvrtc.nvrtcResult.NVRTC_ERROR_OUT_OF_MEMORY
            or any(d.message == "out of memory" for d in diagnostics)
        ):  # the compile worker's memory cap (sandbox.confine) or the machine's
            return resource_limited("the compile ran out of memory")
        if not ok and not any(d.severity == "error" for d in diagnostics):
            diagnostics += (Diagnostic(line=0, column=0, severity="error", message=log.strip() or str(err)),)
        result = CompileResult(
            ok=ok,
            log=log,
            diagnostics=diagnostics,
            resources=parse_resources(log),
            lowered_names=lowered,
            seconds=time.perf_counter() - start,
        )
        return Compiled(result, binary, ptx)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _program_log(nvrtc: Any, prog: Any) -> str:
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    buf = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0").decode("utf-8", "replace")


def _output(nvrtc: Any, prog: Any, ptx: bool) -> bytes:
    if ptx:
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetPTX(prog, buf)
    else:
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, buf)
    return bytes(buf)


# `kernel.cu(12): error: expected a ";"` / `kernel.cu(3): warning #177-D: variable "x" ...`
_DIAG = re.compile(
    r"^(?P<file>[^\n()]*)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning|remark|note)"
    r"(?: #[\w-]+)?: (?P<msg>.*)$"
)


def parse_diagnostics(log: str) -> tuple[Diagnostic, ...]:
    """Diagnostics from an NVRTC log. The column comes from the caret line NVRTC prints below the
    echoed source line (1-based; 0 when there is none)."""
    lines = log.splitlines()
    out: list[Diagnostic] = []
    for i, text in enumerate(lines):
        m = _DIAG.match(text)
        if not m:
            continue
        column = 0
        if i + 2 < len(lines) and lines[i + 2].strip() == "^":
            caret = lines[i + 2].index("^")
            echoed = lines[i + 1]
            indent = len(echoed) - len(echoed.lstrip(" "))
            # NVRTC indents the echoed line by two spaces; the caret is aligned to it.
            column = max(caret - min(indent, 2), 0) + 1
        sev = m["sev"]
        severity = "error" if "error" in sev else "warning" if sev == "warning" else "note"
        out.append(
            Diagnostic(
                line=int(m["line"]),
                column=column,
                severity=severity,  # type: ignore[arg-type]
                message=m["msg"].strip(),
                file=m["file"],
            )
        )
    return tuple(out)


_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)'")
_FRAME = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads"
)
_USED = re.compile(r"Used (?P<regs>\d+) registers")
_SMEM = re.compile(r"(?P<smem>\d+) bytes smem")
_CMEM = re.compile(r"(?P<cmem>\d+) bytes cmem\[0\]")


def parse_resources(log: str) -> dict[str, Resources]:
    """Per-entry-function resources from ptxas' ``-v`` report, keyed by the (mangled) name."""
    out: dict[str, Resources] = {}
    current: str | None = None
    fields: dict[str, int] = {}
    for text in log.splitlines():
        m = _ENTRY.search(text)
        if m:
            if current is not None:
                out[current] = Resources(**fields)
            current, fields = m["name"], {}
            continue
        if current is None:
            continue
        if m := _FRAME.search(text):
            fields.update(stack_bytes=int(m["stack"]), spill_stores=int(m["st"]), spill_loads=int(m["ld"]))
        if m := _USED.search(text):
            fields["registers"] = int(m["regs"])
            if s := _SMEM.search(text):
                fields["shared_bytes"] = int(s["smem"])
            if c := _CMEM.search(text):
                fields["constant_bytes"] = int(c["cmem"])
    if current is not None:
        out[current] = Resources(**fields)
    return out
