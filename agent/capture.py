"""A spec from a watched launch (``cuda-agent capture``): no guessing, the program showed it.

:mod:`sandbox.capture` runs the user's program and records each launch (kernel, grid, block,
dynamic shared memory, every parameter's bytes, each pointer's allocation and whether the launch
changed it).  Here one :class:`~sandbox.capture.RecordedLaunch` becomes a :class:`~cudasrc.specs.KernelSpec`
for the kernel's definition in the source (matched by name and, for a template, instantiation):

- integer scalars (4 or 8 bytes) become sizes, named after their parameter, at their values;
- each pointer's region of its allocation gives the array's count (bytes over the element size of
  the parameter's type, template arguments substituted) and its offset; counts equal to a size,
  a product of two sizes or a size plus a few become that expression;
- roles: a region the launch changed is written (``out`` where the body's first access is a plain
  store, else ``inout``); an unchanged one is ``in`` (unless the body stores to it: then the
  static role stays, with a note);
- the launch is the one watched: each grid dimension equal to ``cdiv(size, block)`` is written so,
  and the spec verifies at the program's own sizes, where that launch is valid;
- other scalars keep their values; a null pointer is ``NULL``.
What cannot be said in a spec (a struct parameter, a pointer outside device memory) is a note.
"""

from __future__ import annotations

import difflib
import itertools
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from base.errors import InputError
from cudasrc import dtypes
from cudasrc import specs as specs
from cudasrc.source import Document
from cudasrc.syntax import Kernel
from sandbox.capture import CaptureRun, RecordedLaunch

_STRUCT = {
    "int8": "b",
    "uint8": "B",
    "int16": "h",
    "uint16": "H",
    "int32": "i",
    "uint32": "I",
    "int64": "q",
    "uint64": "Q",
    "float16": "e",
    "float32": "f",
    "float64": "d",
    "bool": "?",
}
_INTEGER_SIZES = frozenset({"int32", "uint32", "int64", "uint64"})
_RESERVED = frozenset({"block", "block_x", "block_y", "block_z", "bytes", "i", "j", "k"})


class CaptureMismatch(InputError, ValueError):
    """The launch and the source do not fit together (no such kernel, another parameter list)."""


@dataclass(frozen=True)
class KernelName:
    """A demangled kernel name taken apart: ``void ns::k<float, 4>(float*, int)`` ->
    ``ns::k``, ``("float", "4")``, ``("float*", "int")``."""

    qualified: str
    template_args: tuple[str, ...]
    param_types: tuple[str, ...]


@dataclass(frozen=True)
class Captured:
    """A launch turned into a spec for one kernel of one document."""

    launch: RecordedLaunch
    kernel: Kernel
    spec: specs.KernelSpec
    notes: tuple[str, ...]
    saved: dict[str, str]  # argument -> file holding its contents before the launch

    @property
    def text(self) -> str:
        """The spec block, as written above the kernel."""
        return render(self.spec)


def _split_top(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _matching_open(text: str, close: int, pair: str) -> int:
    depth = 0
    for i in range(close, -1, -1):
        if text[i] == pair[1]:
            depth += 1
        elif text[i] == pair[0]:
            depth -= 1
            if depth == 0:
                return i
    return -1


def parse_name(demangled: str) -> KernelName:
    """Take a demangled name apart (an ``extern "C"`` name is just the name)."""
    text = demangled.strip()
    params: tuple[str, ...] = ()
    if text.endswith(")"):
        open_at = _matching_open(text, len(text) - 1, "()")
        if open_at > 0:
            inner = text[open_at + 1 : -1].strip()
            params = tuple(p for p in _split_top(inner) if p and p != "void")
            text = text[:open_at].rstrip()
    targs: tuple[str, ...] = ()
    if text.endswith(">"):
        open_at = _matching_open(text, len(text) - 1, "<>")
        if open_at > 0:
            targs = tuple(_split_top(text[open_at + 1 : -1]))
            text = text[:open_at].rstrip()
    # a template's name starts with its return type ("void ")
    text = text.removeprefix("void ").strip()
    return KernelName(text, targs, params)


def _names_kernel(name: KernelName, k: Kernel) -> bool:
    q = name.qualified.replace("(anonymous namespace)::", "")
    return q == k.qualified_name or q.endswith("::" + k.qualified_name) or q == k.name


def find_kernel(docs: Sequence[Document], launch: RecordedLaunch) -> tuple[Document, Kernel]:
    """The definition the launch ran: same name, same number of parameters, and a template when
    the launch was of an instantiation."""
    name = parse_name(launch.kernel)
    seen = []
    for doc in docs:
        for k in doc.kernels:
            if not _names_kernel(name, k):
                continue
            seen.append(k)
            if bool(k.template_params) != bool(name.template_args):
                continue
            if launch.params and len(launch.params) != len(k.params):
                continue
            return doc, k
    if seen:
        raise CaptureMismatch(
            f"{name.qualified} is defined with {len(seen[0].params)} parameters, the launch passed "
            f"{len(launch.params)}: is the source the program was built from?"
        )
    raise CaptureMismatch(f"kernel {name.qualified} not found in the source files given")


def _scalar(raw: bytes, dtype: str) -> float | int | None:
    if dtype == "bfloat16" and len(raw) == 2:
        return float(struct.unpack("<f", b"\0\0" + raw)[0])
    fmt = _STRUCT.get(dtype)
    if fmt is None or struct.calcsize(fmt) != len(raw):
        return None
    value = struct.unpack("<" + fmt, raw)[0]
    return int(value) if isinstance(value, bool) else value


def _literal(value: float | int) -> str | None:
    """A value as a spec expression (None: NaN, which a spec cannot say)."""
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return None
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    text = repr(value)
    if "e" in text or "E" in text:  # the spec grammar takes decimals, not exponents
        text = f"{value:.20f}".rstrip("0")
        text = text + "0" if text.endswith(".") else text
    return text


def _count_expr(count: int, sizes: dict[str, int]) -> str:
    usable = [(n, v) for n, v in sizes.items() if v >= 2]
    for n, v in usable:
        if v == count:
            return n
    for (a, va), (b, vb) in itertools.combinations_with_replacement(usable, 2):
        if va * vb == count:
            return f"{a} * {b}"
    for n, v in usable:
        if 0 < count - v <= 16:
            return f"{n} + {count - v}"
    return str(count)


def _grid_expr(g: int, b: int, axis: str, sizes: dict[str, int]) -> str:
    """``cdiv(size, block)`` (or ``block * F`` for F elements per thread) when that is the grid."""
    if g > 1 and b == 1:  # one block per row: the size itself
        return next((n for n, v in sizes.items() if v == g), str(g))
    if g > 1:
        for f in (1, 2, 4, 8, 16, 32):
            for n, v in sizes.items():
                if v >= 2 and -(-v // (b * f)) == g:
                    return f"cdiv({n}, {axis})" if f == 1 else f"cdiv({n}, {axis} * {f})"
    return str(g)


def _trim(dims: tuple[int, int, int]) -> tuple[int, ...]:
    n = 3 if dims[2] != 1 else 2 if dims[1] != 1 else 1
    return dims[:n]


def spec_from_launch(doc: Document, kernel: Kernel, launch: RecordedLaunch) -> Captured:
    """The spec of ``kernel`` that reproduces ``launch`` (see the module's docstring)."""
    name = parse_name(launch.kernel)
    if launch.params and len(launch.params) != len(kernel.params):
        raise CaptureMismatch(
            f"{kernel.qualified_name} has {len(kernel.params)} parameters, the launch passed {len(launch.params)}"
        )
    if not launch.params and kernel.params:
        raise CaptureMismatch(
            f"the launch of {kernel.qualified_name} was recorded without its parameters"
            + (f" ({launch.note})" if launch.note else "")
        )
    aliases = dict(doc.type_aliases)
    for tp, arg in zip(kernel.template_params, name.template_args, strict=False):
        if tp.kind == "type":
            aliases[tp.name] = arg
    static_roles = specs.roles(doc, kernel)
    notes: list[str] = []
    if launch.note:
        notes.append(launch.note)

    sizes: dict[str, int] = {}
    scalars: dict[str, str] = {}
    for p, v in zip(kernel.params, launch.params, strict=True):
        if p.pointer:
            continue
        dtype = dtypes.canonical_dtype(p.base_type, aliases)
        value = _scalar(v.raw, dtype) if dtype else None
        if value is None:
            notes.append(
                f"{p.name}: a {v.size}-byte `{p.type_text}` value cannot be written in a spec; set it by hand"
            )
            continue
        if dtype in _INTEGER_SIZES and p.name not in _RESERVED and isinstance(value, int) and value >= 0:
            sizes[p.name] = value
            scalars[p.name] = p.name
        else:
            text = _literal(value)
            if text is None:
                notes.append(f"{p.name}: NaN cannot be written in a spec; set it by hand")
                continue
            scalars[p.name] = text

    args: list[specs.ArraySpec | specs.ScalarSpec] = []
    saved: dict[str, str] = {}
    for p, v in zip(kernel.params, launch.params, strict=True):
        if p.pointer:
            dtype = dtypes.canonical_dtype(p.base_type, aliases) if p.pointer == 1 else "uint64"
            raw = int.from_bytes(v.raw, "little") if v.raw else 0
            if v.pointer is None:
                if raw == 0:
                    args.append(specs.ScalarSpec(p.name, "uint64", "NULL"))
                else:
                    notes.append(
                        f"{p.name}: points outside device memory (host or mapped memory); set it by hand"
                    )
                continue
            if dtype is None:
                notes.append(f"{p.name}: element type `{p.base_type}` unknown; bytes counted as uint8")
                dtype = "uint8"
            size = dtypes.dtype_bytes(dtype)
            count = v.pointer.region_size // size
            offset = v.pointer.offset // size
            if v.pointer.offset % size or v.pointer.region_size % size:
                notes.append(f"{p.name}: its region is not a whole number of {dtype} elements (rounded down)")
            static = static_roles.get(p.name, "inout")
            written = v.pointer.written
            role: specs.ArrayRole
            if written is None:
                role = static
                notes.append(f"{p.name}: memory not read around the launch; role `{static}` from the body")
            elif written:
                role = static if static in ("out", "inout") else "inout"
            elif static != "in":
                role = static
                notes.append(
                    f"{p.name}: not changed by this launch, but the body stores to it: kept `{static}`"
                )
            else:
                role = "in"
            dist = specs.default_dist(dtype)
            args.append(
                specs.ArraySpec(p.name, role, dtype, _count_expr(count, sizes), dist, offset=str(offset))
            )
            if v.pointer.saved:
                saved[p.name] = v.pointer.saved
        elif p.name in scalars:
            dtype = dtypes.canonical_dtype(p.base_type, aliases) or "int32"
            args.append(specs.ScalarSpec(p.name, dtype, scalars[p.name]))

    if not sizes:
        args = _sized_by_count(args, {p.name for p in kernel.params}, sizes)

    block = _trim(launch.block)
    grid = _trim(launch.grid)
    axes = ("block",) if len(block) == 1 else ("block_x", "block_y", "block_z")
    grid_exprs = tuple(
        _grid_expr(g, launch.block[d], axes[d] if d < len(axes) else str(launch.block[d]), sizes)
        for d, g in enumerate(grid)
    )
    spec = specs.KernelSpec(
        kernel=kernel.qualified_name,
        sizes={n: str(v) for n, v in sizes.items()},
        verify=({n: str(v) for n, v in sizes.items()},) if sizes else (),
        grid=grid_exprs,
        block=tuple(str(b) for b in block),
        smem=str(launch.smem),
        args=tuple(args),
        template_args=name.template_args,
    )
    return Captured(launch, kernel, spec, tuple(notes), saved)


def _sized_by_count(
    args: list[specs.ArraySpec | specs.ScalarSpec], taken: set[str], sizes: dict[str, int]
) -> list[specs.ArraySpec | specs.ScalarSpec]:
    """``args`` of a kernel without integer parameters (its extent is its launch's, as a transpose
    that reads ``gridDim``) with the largest array's element count as its size ``n`` (added to
    ``sizes``): the spec has a size to verify at, and the counts are written with it."""
    counts = [int(a.count) for a in args if isinstance(a, specs.ArraySpec) and a.count.isdigit()]
    if not counts:
        return args
    name = next(n for n in ("n", "n_elements", "n_total") if n not in taken)
    sizes[name] = max(counts)
    return [
        replace(a, count=_count_expr(int(a.count), sizes))
        if isinstance(a, specs.ArraySpec) and a.count.isdigit()
        else a
        for a in args
    ]


def render(spec: specs.KernelSpec) -> str:
    """:func:`cudasrc.specs.render`, less a ``sizes`` line without sizes (a kernel with none)."""
    text = specs.render(spec)
    if spec.sizes:
        return text
    return "".join(line for line in text.splitlines(keepends=True) if line.split()[2:3] != ["sizes"])


def with_spec(doc: Document, kernel: Kernel, block: str) -> str:
    """The document's text with ``block`` (spec lines) above ``kernel``, in place of its spec lines
    (other comment lines stay)."""
    lines = doc.text.splitlines(keepends=True)
    old = {line for line, text in kernel.comment if specs.directive_text(text) is not None}
    at = kernel.span.start_line
    head = [ln for i, ln in enumerate(lines[:at]) if i not in old]
    return "".join(head) + block + "".join(lines[at:])


def diff(path: str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{path}", f"b/{path}"
        )
    )


def nothing_captured(program: str, run: CaptureRun) -> str:
    """Why ``run`` of ``program`` recorded no launch: the library's errors, else the kernels it saw."""
    seen = ", ".join(f"{k} ({n}x)" for k, n in run.kernels.items()) or "none"
    why = "; ".join(run.errors) or f"no launch matched (kernels launched: {seen})"
    return f"nothing captured from {program} (exit status {run.returncode}): {why}"


def choose(launches: Sequence[RecordedLaunch], index: int | None) -> RecordedLaunch:
    """The launch asked for (its index among matching launches), else the first recorded."""
    if index is None:
        return launches[0]
    for launch in launches:
        if launch.index == index:
            return launch
    raise CaptureMismatch(
        f"launch {index} was not recorded (recorded: {', '.join(str(x.index) for x in launches)})"
    )


def check(text: str, path: str, kernel_name: str) -> tuple[str, ...]:
    """Errors of the spec as the new text reads it (empty: it parses and resolves)."""
    doc = Document(text, path)
    k = next((k for k in doc.kernels if k.qualified_name == kernel_name), None)
    if k is None:
        return (f"{kernel_name} not found after the edit",)
    result = specs.spec_for(doc, k)
    if result.source != "parsed" or result.spec is None:
        return tuple(e.message for e in result.errors) or ("the spec was not read back",)
    try:
        specs.problems(result.spec)
    except specs.InvalidSpec as exc:
        return (str(exc),)
    return tuple(e.message for e in result.errors)


_SUFFIXES = frozenset({".cu", ".cuh", ".h", ".hpp", ".hh", ".cc", ".cpp", ".cxx", ".inl"})
_SKIP = frozenset({"build", "node_modules", "__pycache__", "site-packages", "dist"})


def source_files(roots: Sequence[str], limit: int = 5000, mention: bytes = b"__global__") -> list[Path]:
    """The files under ``roots`` (files or folders) that may define a kernel: C/C++/CUDA sources
    that mention ``__global__`` (or ``mention``: ``<<<`` for files that may launch one); hidden and
    build folders skipped, at most ``limit`` files looked at."""
    found: list[Path] = []
    seen = 0
    for root in roots:
        base = Path(root)
        paths = [base] if base.is_file() else sorted(base.rglob("*")) if base.is_dir() else []
        for path in paths:
            if seen >= limit:
                return found
            rel = path.relative_to(base).parts[:-1] if path != base else ()
            if any(part.startswith(".") or part in _SKIP for part in rel):
                continue
            if path.suffix not in _SUFFIXES or not path.is_file():
                continue
            seen += 1
            try:
                if path.stat().st_size < 4 << 20 and mention in path.read_bytes():
                    found.append(path)
            except OSError:
                continue
    return found


@dataclass(frozen=True)
class CaptureEdit:
    """The spec of one recorded launch, placed in its kernel's file: what the CLI shows as a diff
    and the editor as a confirmed edit.  ``errors``: the spec as the new text reads it (empty: it
    parses and resolves).  ``start_line``..``end_line`` (0-based, end exclusive) of ``doc`` are
    replaced by ``replacement`` (the kernel's old spec lines go, its other comment lines stay)."""

    launch: RecordedLaunch
    doc: Document
    captured: Captured
    new_text: str
    start_line: int
    end_line: int
    replacement: str
    errors: tuple[str, ...]

    @property
    def diff(self) -> str:
        return diff(self.doc.path or "file", self.doc.text, self.new_text)


def propose(
    launches: Sequence[RecordedLaunch],
    index: int | None,
    roots: Sequence[str],
    open_documents: Mapping[str, Document] | None = None,
) -> CaptureEdit:
    """Choose the launch, find its kernel under ``roots`` (a file's open version from
    ``open_documents``, by resolved path, wins over the disk), and place its spec."""
    launch = choose(launches, index)
    opened = {str(Path(p).resolve()): d for p, d in (open_documents or {}).items()}
    docs = []
    for path in source_files(roots):
        key = str(path.resolve())
        docs.append(
            opened.get(key) or Document(path.read_bytes().decode("utf-8", errors="replace"), str(path))
        )
    doc, kernel = find_kernel(docs, launch)
    captured = spec_from_launch(doc, kernel, launch)
    new_text = with_spec(doc, kernel, captured.text)
    old = sorted(line for line, text in kernel.comment if specs.directive_text(text) is not None)
    at = kernel.span.start_line
    start = min([*old, at])
    lines = doc.text.splitlines(keepends=True)
    kept = "".join(lines[i] for i in range(start, at) if i not in set(old))
    errors = check(new_text, doc.path or "", kernel.qualified_name)
    return CaptureEdit(launch, doc, captured, new_text, start, at, kept + captured.text, errors)
