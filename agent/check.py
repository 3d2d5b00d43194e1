"""Compile each kernel of a file on its own with NVRTC and map what the compiler says back to the file.

Every kernel is cut out with its dependencies (:meth:`cudasrc.source.Document.standalone`) and
compiled through :func:`sandbox.compiler.compile_cuda` — no GPU or driver needed.  Diagnostics
come back at lines of the user's file; ptxas' registers, spills and shared memory per kernel;
each written spec's mistakes at their lines (a broken spec fails the check).
A template kernel is instantiated as its spec says (or as the file launches it); without
either it is compiled uninstantiated, which checks syntax but yields no resources.

Include paths and defines come from the caller or from a ``compile_commands.json`` entry.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from base.errors import InputError
from cudasrc.host import launch_of
from cudasrc.source import Document
from cudasrc.specs import KernelSpec, SpecError, infer, parse, split_args, template_names
from cudasrc.syntax import Issue, Kernel
from sandbox.compiler import compile_cuda
from sandbox.contract import Diagnostic, Resources


@dataclass(frozen=True)
class KernelCheck:
    """One kernel's standalone compile.  Diagnostic lines are 1-based lines of the user's file
    (``file`` says which file: the checked one, or a header it includes)."""

    kernel: str
    ok: bool
    name_expression: str  # "" when a template was compiled uninstantiated
    diagnostics: tuple[Diagnostic, ...]
    resources: Resources | None
    seconds: float
    note: str = ""
    spec_errors: tuple[SpecError, ...] = ()  # mistakes in the kernel's written spec (0-based lines)


@dataclass(frozen=True)
class FileCheck:
    path: str
    arch: str
    kernels: tuple[KernelCheck, ...]
    issues: tuple[Issue, ...]  # what the parser could not understand (0-based lines)

    @property
    def ok(self) -> bool:
        """Every kernel compiles and every written spec is valid."""
        return all(k.ok and not k.spec_errors for k in self.kernels)

    @property
    def diagnostics(self) -> tuple[Diagnostic, ...]:
        """Every kernel's diagnostics, each reported once (kernels share their dependencies)."""
        seen: dict[tuple[str, int, int, str], Diagnostic] = {}
        for k in self.kernels:
            for d in k.diagnostics:
                seen.setdefault((d.file, d.line, d.column, d.message), d)
        return tuple(sorted(seen.values(), key=lambda d: (d.file, d.line, d.column)))


def check_document(
    doc: Document,
    *,
    arch: str = "sm_90",
    options: tuple[str, ...] = (),
    on_kernel: Callable[[KernelCheck], None] | None = None,
) -> FileCheck:
    """Compile every kernel of ``doc``, in order; compile errors are values in the result, never
    raised.  ``on_kernel`` gets each kernel's check as soon as it is compiled (a file of a hundred
    kernels takes tens of seconds).  Raises :class:`sandbox.compiler.CompilerUnavailable` when
    NVRTC itself cannot be loaded."""
    checks = []
    for k in doc.kernels:
        checks.append(check_kernel(doc, k, arch=arch, options=options))
        if on_kernel is not None:
            on_kernel(checks[-1])
    return FileCheck(doc.path, arch, tuple(checks), doc.issues)


def check_kernel(
    doc: Document, kernel: Kernel, *, arch: str = "sm_90", options: tuple[str, ...] = ()
) -> KernelCheck:
    spec, spec_errors = parse(kernel, doc.type_aliases, doc.integer_constants)
    name_expression, note = _name_expression(doc, kernel, spec if not spec_errors else None)
    targs = split_args(name_expression[len(kernel.qualified_name) :]) if name_expression else []
    unit = doc.standalone(kernel, also=template_names(tuple(targs)))
    filename = Path(doc.path).name if doc.path else "kernel.cu"
    compiled = compile_cuda(
        unit.source,
        filename=filename,
        name_expressions=(name_expression,) if name_expression else (),
        arch=arch,
        options=(*unit.options, *options),
        trusted=True,  # the user's own file, headers and -I folders
    ).result
    diagnostics = []
    for d in compiled.diagnostics:
        if d.file in (filename, "") and d.line > 0:
            original = unit.original_line(d.line - 1)
            d = replace(d, line=original + 1 if original >= 0 else 0, file=doc.path or filename)
        diagnostics.append(d)
    mangled = compiled.lowered_names.get(name_expression, "")
    resources = compiled.resources.get(mangled) if mangled else None
    if resources is None and not kernel.template_params:
        resources = compiled.resources.get(kernel.name)  # extern "C": ptxas uses the plain name
    return KernelCheck(
        kernel.qualified_name,
        compiled.ok,
        name_expression,
        tuple(diagnostics),
        resources,
        compiled.seconds,
        note,
        tuple(sorted(spec_errors, key=lambda e: e.line)),
    )


def _name_expression(doc: Document, kernel: Kernel, spec: KernelSpec | None) -> tuple[str, str]:
    """How to instantiate ``kernel``: as its valid spec (``spec``) says, else as the file launches it."""
    if not kernel.template_params:
        return kernel.qualified_name, ""
    if spec is not None and spec.template_args:
        return spec.name_expression, ""
    if doc.launches_of(kernel.name) or launch_of(doc, kernel.name) is not None:
        return infer(doc, kernel).spec.name_expression, "instantiated as the project launches it"
    return "", "template without a `template` spec line or launch: compiled uninstantiated (no resources)"


class CompileCommandsError(InputError):
    """A compile_commands.json cannot be used: unreadable, not a list, or no entry for the file."""


class DefineError(InputError):
    """A ``-D`` definition is not ``NAME``, ``NAME=VALUE`` or ``F(x)=...``."""


_DEFINE = re.compile(r"[A-Za-z_]\w*(\([\w\s,.]*\))?(=[^\x00-\x1f\x7f]*)?")


def valid_define(definition: str) -> bool:
    """Whether a ``-D`` value reads ``NAME``, ``NAME=VALUE`` or ``F(x)=...`` (what nvcc takes)."""
    return _DEFINE.fullmatch(definition) is not None


def build_options(
    source: str | Path,
    include: tuple[str, ...] = (),
    define: tuple[str, ...] = (),
    compile_commands: str | Path | None = None,
) -> tuple[str, ...]:
    """The one build configuration of ``source`` (``-I``, ``-D``, then its compile_commands.json
    entry's), resolved once for check, diagnostics, bench, optimize, compare and suite.  Raises
    :class:`DefineError` when a definition is not ``NAME[=VALUE]``, :class:`CompileCommandsError`
    when the compile commands are unusable."""
    for d in define:
        if not valid_define(d):
            raise DefineError(
                f"-D {d[:60]!r}: expected NAME or NAME=VALUE (NAME a C identifier, F(x)=... a macro)"
            )
    options = [f"-I{Path(i).resolve()}" for i in include] + [f"-D{d}" for d in define]
    if compile_commands:
        options += compile_commands_options(compile_commands, source)
    return tuple(options)


def compile_commands_options(path: str | Path, source: str | Path) -> tuple[str, ...]:
    """``-I``/``-D``/``-U``/``-std`` options of ``source``'s entry in a compile_commands.json
    (paths made absolute against the entry's directory).  Raises :class:`CompileCommandsError` when unusable."""
    try:
        entries = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CompileCommandsError(f"{path}: cannot read compile commands ({exc})") from None
    if not isinstance(entries, list):
        raise CompileCommandsError(f"{path}: expected a JSON list of compile commands")
    target = Path(source).resolve()
    for entry in entries:
        if not isinstance(entry, dict) or "file" not in entry:
            continue
        directory = Path(str(entry.get("directory", ".")))
        if (directory / str(entry["file"])).resolve() != target:
            continue
        args = entry.get("arguments") or shlex.split(str(entry.get("command", "")))
        return _useful_options([str(a) for a in args], directory)
    raise CompileCommandsError(f"{path}: no entry for {source}")


def _useful_options(args: list[str], directory: Path) -> tuple[str, ...]:
    out: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        for flag in ("-I", "-isystem", "-D", "-U", "--include-path", "--define-macro"):
            if a == flag and i + 1 < len(args):
                out.append(_option(flag, args[i + 1], directory))
                i += 1
                break
            if a.startswith(flag) and a != flag and not a.startswith(flag + "-"):
                out.append(_option(flag, a[len(flag) :].lstrip("="), directory))
                break
        else:
            if a.startswith(("-std=", "--std=")):
                out.append("-std=" + a.split("=", 1)[1])
        i += 1
    return tuple(out)


def _option(flag: str, value: str, directory: Path) -> str:
    if flag in ("-I", "-isystem", "--include-path"):
        p = Path(value)
        return f"-I{p if p.is_absolute() else (directory / p).resolve()}"
    return f"-{'D' if flag in ('-D', '--define-macro') else 'U'}{value}"
