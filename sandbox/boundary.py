"""What an untrusted compile may ask for: NVRTC options, a filename, and the headers it includes.

A request's sender (a remote client) and an LLM are not trusted; the machine that compiles and
runs their code is.  :func:`sandbox.compiler.compile_cuda` in untrusted mode (the default) calls
:func:`check_untrusted` before NVRTC sees anything, so a request can neither read nor write the
compiling host's files through the compiler, whether or not the compile runs inside bubblewrap:

- options: an allow-list (:func:`check_options`); everything else, e.g. ``--time=FILE``,
  ``--create-pch=FILE``, ``-I/``, ``--pre-include``, is refused by name;
- filename: a plain basename (:func:`check_filename`); NVRTC names it in diagnostics and looks for
  quoted includes next to it;
- includes: every ``#include`` of the source and of the headers the request carries must name a
  header the request carries (matched by exact name, passed to NVRTC in memory) or a file inside
  CUDA's and CCCL's header folders or our stand-ins (:func:`include_violation`).  Absolute paths,
  ``..``, computed includes (``#include MACRO``) and anything else are refused with a message that
  names the include, never with the contents of a file.

NVRTC opens an absolute ``#include`` path directly and searches the folder of the program's name
(the working directory for a plain name) before its include folders; in-memory headers are matched
by exact name before any file (tested against NVRTC 13; ``-no-source-include`` cannot be used: CUDA's
own headers include their neighbours by quoted relative names).  The scan below therefore sees the source as the preprocessor does
(line splices, comments, string and raw string literals, digraph ``%:``) and errs on the side of
finding a directive.  Trigraphs are replaced only where the compile's language standard replaces
them (:func:`applies_trigraphs`: ``-std=c++03/11/14``; NVRTC's default here, C++17, and C++20 do
not): a ``??/`` before a newline splices the next line into a comment or a string under C++14 and
is three characters under C++17, so scanning in the wrong dialect would hide a live ``#include``.
"""

from __future__ import annotations

import bisect
import functools
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from sandbox.contract import KernelSource

MAX_FILENAME = 100
DEFAULT_STD = "c++17"  # the standard a compile uses when its options name none
_TRIGRAPH_STDS = frozenset({"c++03", "c++11", "c++14"})  # trigraphs were removed in C++17
MAX_HEADER_NAME = 200

# Options an untrusted compile may pass: exact flags, and prefixes whose value is checked.
_FLAGS = frozenset(
    {
        "--use_fast_math", "-use_fast_math", "-lineinfo", "--generate-line-info",
        "-default-device", "--device-as-default-execution-space", "-w", "--disable-warnings",
        "-restrict", "--restrict", "-extra-device-vectorization", "--extra-device-vectorization",
    }
)  # fmt: skip
_BOOL = re.compile(r"(true|false)")
_VALUED: dict[str, re.Pattern[str]] = {
    "-D": re.compile(r"[A-Za-z_]\w*(=[^\x00-\x1f\x7f]*)?"),
    "--define-macro=": re.compile(r"[A-Za-z_]\w*(=[^\x00-\x1f\x7f]*)?"),
    "-U": re.compile(r"[A-Za-z_]\w*"),
    "--undefine-macro=": re.compile(r"[A-Za-z_]\w*"),
    "-std=": re.compile(r"c\+\+(03|11|14|17|20)"),
    "--std=": re.compile(r"c\+\+(03|11|14|17|20)"),
    "-arch=": re.compile(r"(sm|compute)_\d{2,3}[af]?"),
    "--gpu-architecture=": re.compile(r"(sm|compute)_\d{2,3}[af]?"),
    "-fmad=": _BOOL,
    "--fmad=": _BOOL,
    "-ftz=": _BOOL,
    "--ftz=": _BOOL,
    "-prec-div=": _BOOL,
    "--prec-div=": _BOOL,
    "-prec-sqrt=": _BOOL,
    "--prec-sqrt=": _BOOL,
    "-rdc=": _BOOL,
    "--relocatable-device-code=": _BOOL,
    "-maxrregcount=": re.compile(r"\d{1,3}"),
    "--maxrregcount=": re.compile(r"\d{1,3}"),
}
# Thrust picks headers with computed includes built from these macros: a request must not steer them.
_RESERVED_MACROS = ("THRUST_", "__THRUST")
ALLOWED_OPTIONS_TEXT = (
    "-D/-U, -std=, -arch= (the device's own), --use_fast_math, -lineinfo, --fmad=, -ftz=, -prec-div=, "
    "-prec-sqrt=, -rdc=, -maxrregcount=, -default-device, -restrict, -w"
)


def check_options(
    options: Sequence[str], arch: str | None = None, steering: frozenset[str] = frozenset()
) -> str | None:
    """Why an untrusted compile may not pass ``options`` (naming the first bad one), or None.
    ``arch``: the architecture the compile is for; an ``-arch`` option must equal it.
    ``steering``: macro names a ``-D``/``-U`` may not name (:func:`steering_macros`)."""
    for option in options:
        if not isinstance(option, str):
            return f"NVRTC option {option!r} is not a string"
        if option in _FLAGS:
            continue
        prefix = next((p for p in _VALUED if option.startswith(p)), None)
        value = option[len(prefix) :] if prefix else ""
        if prefix is None or not _VALUED[prefix].fullmatch(value):
            return f"NVRTC option {option!r} is not allowed in a request (allowed: {ALLOWED_OPTIONS_TEXT})"
        if prefix in ("-D", "--define-macro=", "-U", "--undefine-macro=") and value.startswith(
            _RESERVED_MACROS
        ):
            return f"NVRTC option {option!r} is not allowed in a request (it steers Thrust's includes)"
        name = value.partition("=")[0]
        if prefix in ("-D", "--define-macro=", "-U", "--undefine-macro=") and name in steering:
            return f"NVRTC option {option!r} is not allowed in a request: {_STEERS.format(name)}"
        if prefix in ("-arch=", "--gpu-architecture=") and arch is not None and value != arch:
            return f"NVRTC option {option!r} is not allowed: this worker compiles for {arch}"
    return None


def check_filename(filename: str) -> str | None:
    """Why ``filename`` is not a safe name for an untrusted translation unit, or None: a plain
    basename of printable characters, no ``/`` or ``\\``, not ``.`` or ``..``, at most 100 characters."""
    if not isinstance(filename, str) or not filename:
        return "the kernel's filename is empty"
    if len(filename) > MAX_FILENAME:
        return f"the kernel's filename is longer than {MAX_FILENAME} characters"
    if not filename.isprintable() or any(c in filename for c in "/\\") or filename in (".", ".."):
        return f"the kernel's filename {filename!r} must be a plain file name (no folders, no control characters)"
    return None


def check_header_name(name: str) -> str | None:
    """Why ``name`` cannot name a header a request carries, or None: a relative path of plain
    components (letters, digits, ``_ . + -``), no ``..``."""
    if not isinstance(name, str) or not name or len(name) > MAX_HEADER_NAME:
        return f"header name {name!r} must be 1-{MAX_HEADER_NAME} characters"
    parts = name.split("/")
    if not re.fullmatch(r"[\w.+/-]+", name, re.ASCII) or any(p in ("", ".", "..") for p in parts):
        return f"header name {name!r} must be a relative path without '..' (letters, digits, _ . + -)"
    return None


def check_kernel(kernel: KernelSource) -> str | None:
    """Why a request's kernel breaks the compile boundary's rules on its options, filename or
    header names, or None.  What a worker's HTTP service refuses up front (422); the includes are
    checked when the kernel is compiled."""
    why = check_filename(kernel.filename) or check_options(kernel.options)
    return why or next((w for name in kernel.headers if (w := check_header_name(name))), None)


def language_standard(options: Sequence[str]) -> str:
    """The ``-std`` a compile with ``options`` uses: the last one given (NVRTC takes the last), or
    :data:`DEFAULT_STD`."""
    std = DEFAULT_STD
    for option in options:
        prefix = next((p for p in ("-std=", "--std=") if option.startswith(p)), None)
        if prefix:
            std = option[len(prefix) :]
    return std


def applies_trigraphs(options: Sequence[str]) -> bool:
    """True if the preprocessor replaces trigraphs (``??/`` is ``\\``) under these options."""
    return language_standard(options) in _TRIGRAPH_STDS


def check_untrusted(
    source: str,
    filename: str,
    options: Sequence[str],
    headers: Mapping[str, str],
    arch: str,
    include_dirs: Sequence[str],
) -> str | None:
    """Why an untrusted compile must not run, or None (see the module docstring)."""
    dirs = tuple(include_dirs)
    defines = any(o.startswith(("-D", "--define-macro=", "-U", "--undefine-macro=")) for o in options)
    why = check_filename(filename) or check_options(
        options, arch, steering_macros(dirs) if defines else frozenset()
    )
    if why:
        return why
    for name in headers:
        if why := check_header_name(name):
            return why
    trigraphs = applies_trigraphs(options)
    for where, text in [(filename, source), *headers.items()]:
        if why := include_violation(text, headers, dirs, trigraphs=trigraphs):
            return f"{where}:{why}"
    return None


_STEERS = "an allowed header builds an #include from the name `{}` (a computed include)"


def include_violation(
    text: str, headers: Mapping[str, str], include_dirs: Sequence[str], *, trigraphs: bool
) -> str | None:
    """``line: why`` for the first include of ``text`` an untrusted compile may not make, or None.
    ``trigraphs``: whether the compile replaces them (:func:`applies_trigraphs`).  Messages name
    the include as written (shortened), never a host path."""
    for line, directive, arg in preprocessor_includes(text, trigraphs=trigraphs):
        if directive in ("define", "undef"):
            if arg.startswith(_RESERVED_MACROS):
                return f"{line}: #{directive} {arg} is not allowed in a request (it steers Thrust's includes)"
            if arg in steering_macros(tuple(include_dirs)):
                return f"{line}: #{directive} {arg} is not allowed in a request: {_STEERS.format(arg)}"
            continue
        short = arg if len(arg) <= 80 else arg[:60] + "..." + arg[-10:]
        shown = f"#{directive} {short}" if directive != "__has_include" else f"__has_include({short})"
        if len(arg) < 2 or arg[0] + arg[-1] not in ('""', "<>"):
            return f'{line}: {shown}: computed includes are not allowed in a request; write the header\'s name in "" or <>'
        name = arg[1:-1]
        if name in headers:
            continue
        if len(name) > MAX_HEADER_NAME:
            return f"{line}: {shown}: a header name is at most {MAX_HEADER_NAME} characters"
        parts = re.split(r"[/\\]", name)
        if name.startswith(("/", "\\")) or ".." in parts or "\\" in name:
            return f"{line}: {shown} is not allowed: only CUDA's headers and the request's own headers can be included"
        if "thrust" in parts[:2]:  # thrust/..., cccl/thrust/...
            return f"{line}: {shown} is not allowed in a request (Thrust is host code)"
        if not _in_dirs(name, include_dirs):
            if directive == "__has_include":
                return f"{line}: {shown}: only CUDA's headers and the request's own headers can be tested"
            return f"{line}: {shown}: no such header among CUDA's headers or the request's own headers"
    return None


_COMPUTED = re.compile(rb"^[ \t]*#[ \t]*include[ \t]+[A-Za-z_]", re.MULTILINE)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)(\([^)]*\))?(.*)$", re.MULTILINE)


@functools.cache
def steering_macros(include_dirs: tuple[str, ...]) -> frozenset[str]:
    """The identifiers a request must not define or undefine because an allowed header builds an
    ``#include`` from them (Thrust's ``#include __THRUST_..._HEADER_INCLUDE(execution_policy.h)``:
    ``execution_policy``, ``h``, ``thrust``, ``system``, ``cpp``...): those of every computed
    include in ``include_dirs`` and, transitively, of the replacement lists of the macros they
    name (their parameters excepted).  Read once per process from the trusted headers."""
    texts: dict[str, str] = {}
    for d in include_dirs:
        for folder, _, files in os.walk(d):
            for f in files:
                path = os.path.realpath(os.path.join(folder, f))
                if path in texts:
                    continue
                try:
                    with open(path, "rb") as fh:
                        data = fh.read()
                except OSError:
                    continue
                texts[path] = data.decode("utf-8", "replace") if b"#" in data else ""
    bodies: dict[str, set[str]] = {}
    pending: list[str] = []
    for text in texts.values():
        for m in _DEFINE.finditer(text):
            params = set(_IDENT.findall(m[2] or ""))
            bodies.setdefault(m[1], set()).update(set(_IDENT.findall(m[3])) - params)
        if _COMPUTED.search(text.encode()):
            for _, directive, arg in preprocessor_includes(text, trigraphs=True):
                if directive not in ("define", "undef") and arg[:1] not in ('"', "<"):
                    pending += _IDENT.findall(arg)
    found: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending += bodies.get(name, ())
    return frozenset(found)


def _in_dirs(name: str, include_dirs: Sequence[str]) -> bool:
    """True if ``name`` is a file inside one of ``include_dirs`` (symbolic links resolved)."""
    for d in include_dirs:
        root = Path(d).resolve()
        candidate = (root / name).resolve()
        if candidate.is_relative_to(root) and candidate.is_file():
            return True
    return False


# --------------------------------------------------------------------------- the scan

_TRIGRAPHS = {"=": "#", "/": "\\", "'": "^", "(": "[", ")": "]", "!": "|", "<": "{", ">": "}", "-": "~"}
_RAW_PREFIXES = frozenset({"R", "u8R", "uR", "UR", "LR"})
_IDENT = re.compile(r"[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*")
_TOKEN = re.compile(  # preprocessing tokens, as far as the scan needs them
    r"(?P<newline>\n)|(?P<blanks>[ \t\f\v\r]+)|(?P<line_comment>//[^\n]*)|(?P<block_comment>/\*.*?(?:\*/|\Z))"
    r"|(?P<hash>#|%:)|(?P<quote>[\"'])|(?P<identifier>[A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*)"
    r"|(?P<number>\.?\d(?:[eEpP][+-]|'\w|[\w.])*)|(?P<other>[^\s\"'/#%\w.\x80-\U0010ffff]+|.)",
    re.DOTALL,
)
_DIRECTIVES = frozenset({"include", "include_next", "import", "define", "undef"})


_PHASE12 = re.compile(r"(?:\\|\?\?/)[ \t]*\r?\n|\?\?[=/'()!<>-]")
_SPLICE = re.compile(r"\\[ \t]*\r?\n")


def _phase12(src: str, trigraphs: bool) -> tuple[str, Sequence[int]]:
    """Translation phases 1 and 2: trigraphs replaced (only if ``trigraphs``) and line splices
    removed (compilers accept blanks between the backslash and the newline), with the original
    index of each character."""
    if ("?" not in src or not trigraphs) and "\\" not in src:
        return src, range(len(src))
    out: list[str] = []
    where: list[int] = []
    pos = 0
    for m in (_PHASE12 if trigraphs else _SPLICE).finditer(src):
        out.append(src[pos : m.start()])
        where.extend(range(pos, m.start()))
        if m[0].startswith("??") and len(m[0]) == 3:
            out.append(_TRIGRAPHS[m[0][2]])
            where.append(m.start())
        pos = m.end()  # a splice (``\\`` or ``??/`` before a newline) leaves nothing
    out.append(src[pos:])
    where.extend(range(pos, len(src)))
    return "".join(out), where


def preprocessor_includes(src: str, *, trigraphs: bool) -> list[tuple[int, str, str]]:
    """``(line, directive, argument)`` for every ``#include``/``#include_next``/``#import`` (argument:
    the header name with its quotes or brackets, or the macro text of a computed include), every
    ``#define``/``#undef`` (argument: the macro's name) and every ``__has_include(...)`` of ``src``,
    including those in skipped ``#if`` groups, as a compile that replaces trigraphs (or not, as
    ``trigraphs`` says) sees them.  Lines are 1-based lines of ``src``."""
    text, where = _phase12(src, trigraphs)
    found: list[tuple[int, str, str]] = []
    i, n = 0, len(text)
    start_of_line = True

    newlines = [m.start() for m in re.finditer("\n", src)]

    def line_of(k: int) -> int:
        return bisect.bisect_left(newlines, where[k] if k < len(where) else len(src)) + 1

    def skip_blanks(k: int) -> int:  # spaces and comments, not newlines
        while k < n:
            if text[k] in " \t\f\v\r":
                k += 1
            elif text.startswith("/*", k):
                end = text.find("*/", k + 2)
                k = n if end < 0 else end + 2
            else:
                return k
        return k

    while i < n:
        m = _TOKEN.match(text, i)
        assert m is not None  # ``other`` matches any character
        kind = m.lastgroup
        if kind == "newline":
            start_of_line, i = True, m.end()
        elif kind in ("blanks", "line_comment"):
            i = m.end()
        elif kind == "block_comment":
            start_of_line = start_of_line or "\n" in m[0]  # err on the side of a directive after it
            i = m.end()
        elif kind == "hash" and start_of_line:
            start_of_line = False
            k = skip_blanks(m.end())
            d = _IDENT.match(text, k)
            i = k
            if d and d[0] in _DIRECTIVES:
                i = d.end()
                found.append((line_of(k), d[0], _argument(text, skip_blanks(i), d[0])))
        elif kind == "quote":
            start_of_line, i = False, _end_of_literal(text, i)
        elif kind == "identifier":
            start_of_line, i = False, m.end()
            if m[0] in _RAW_PREFIXES and text.startswith('"', i):
                i = _end_of_raw(src, text, where, i)
            elif m[0] in ("__has_include", "__has_include_next"):
                k = skip_blanks(i)
                if text.startswith("(", k):
                    found.append((line_of(i), "__has_include", _argument(text, skip_blanks(k + 1), "")))
        else:  # a number, punctuation, a # that is not a directive's
            start_of_line, i = False, m.end()
    return found


def _argument(text: str, k: int, directive: str) -> str:
    """The header name at ``k`` (with its delimiters) or, when there is none, the rest of the line."""
    end_of_line = text.find("\n", k)
    end_of_line = len(text) if end_of_line < 0 else end_of_line
    if directive in ("define", "undef"):
        m = _IDENT.match(text, k)
        return m[0] if m else ""
    if k < len(text) and text[k] in '"<':
        close = text.find('"' if text[k] == '"' else ">", k + 1, end_of_line)
        if close > 0:
            return text[k : close + 1]
    return text[k:end_of_line].strip()


def _end_of_literal(text: str, i: int) -> int:
    """Index after the string or character literal opening at ``i`` (at the newline if unterminated)."""
    quote, k, n = text[i], i + 1, len(text)
    while k < n and text[k] != "\n":
        if text[k] == "\\":
            k += 2
        elif text[k] == quote:
            return k + 1
        else:
            k += 1
    return min(k, n)


def _end_of_raw(src: str, text: str, where: Sequence[int], quote: int) -> int:
    """Index (in ``text``) after the raw string literal whose ``"`` is at ``quote``.  Line splices
    and trigraphs are undone inside raw strings, so its end is found in the original ``src``."""
    m = re.match(r'"([^ ()\\\t\v\f\n]{0,16})\(', text[quote:])
    if not m:
        return _end_of_literal(text, quote)  # not a raw string after all: the compiler rejects it
    close = ")" + m[1] + '"'
    end = src.find(close, where[quote + m.end() - 1] + 1)
    if end < 0:
        return len(text)
    end += len(close)
    k = quote + m.end()
    while k < len(where) and where[k] < end:
        k += 1
    return k
