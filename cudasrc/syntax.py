"""The parsed text of a CUDA file and the values read from it.

:class:`Parsed` holds a file's text and its tree-sitter tree and converts between positions: lines
are 0-based; columns count UTF-16 code units, as LSP does by default (:class:`Span` also carries
UTF-8 byte offsets).  The values (:class:`Kernel`, :class:`LaunchSite`, :class:`Issue`,
:class:`Standalone`...) are what :class:`cudasrc.source.Document` reads from it.  Parsing is
thread-safe (one tree-sitter parser per thread).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal, Self

import tree_sitter
import tree_sitter_cuda

LANGUAGE = tree_sitter.Language(tree_sitter_cuda.language())

_local = threading.local()


def thread_parser() -> tree_sitter.Parser:
    parser: tree_sitter.Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = tree_sitter.Parser(LANGUAGE)
    return parser


LAUNCH_QUERY = tree_sitter.Query(
    LANGUAGE,
    "(call_expression function: (_) @fn (kernel_call_syntax) @config arguments: (argument_list) @args) @call",
)
NAME_QUERY = tree_sitter.Query(
    LANGUAGE, "[(identifier) (type_identifier) (namespace_identifier) (field_identifier)] @name"
)
IDENT = re.compile(r"[A-Za-z_]\w*")

# ---------------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Span:
    """A range of the document: 0-based lines, UTF-16 columns (LSP), and UTF-8 byte offsets."""

    start_line: int
    start_col: int
    end_line: int
    end_col: int
    start_byte: int
    end_byte: int

    def contains_line(self, line: int) -> bool:
        return self.start_line <= line <= self.end_line


@dataclass(frozen=True)
class Param:
    """One kernel parameter.  ``base_type`` is the element (or scalar) type without qualifiers,
    e.g. ``float``, ``unsigned int``, ``T``; ``pointer`` counts ``*`` (``float v[]`` counts 1)."""

    name: str
    type_text: str  # the declaration without the name, e.g. "const float *__restrict__"
    base_type: str
    pointer: int
    const: bool  # the pointee (or the scalar) is const
    restrict: bool
    reference: bool
    span: Span


@dataclass(frozen=True)
class TemplateParam:
    kind: Literal["type", "value"]
    name: str
    type_text: str = ""  # for a value parameter, e.g. "int"
    default: str = ""


@dataclass(frozen=True)
class LaunchBoundsAttribute:
    """A kernel's ``__launch_bounds__(max_threads, min_blocks)`` attribute as written."""

    max_threads: str  # expression text, e.g. "256" or "BLOCK"
    min_blocks: str = ""


@dataclass(frozen=True)
class Kernel:
    """A ``__global__`` function definition.

    ``span`` covers the whole definition (from ``template`` if it is a template); ``comment`` is
    the block of ``//`` lines directly above it, as (line, text after ``//``) pairs.
    ``qualified_name`` includes enclosing namespaces (``ns::k``), for NVRTC name expressions.
    """

    name: str
    qualified_name: str
    span: Span
    name_span: Span
    body_span: Span | None
    params: tuple[Param, ...]
    template_params: tuple[TemplateParam, ...] = ()
    launch_bounds: LaunchBoundsAttribute | None = None
    extern_c: bool = False
    comment: tuple[tuple[int, str], ...] = ()

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


@dataclass(frozen=True)
class Expr:
    """An expression as written, with where it is."""

    text: str
    span: Span


@dataclass(frozen=True)
class LaunchSite:
    """``kernel<targs><<<grid, block, shared, stream>>>(args)``; absent configuration parts are None."""

    kernel: str
    template_args: tuple[str, ...]
    grid: Expr | None
    block: Expr | None
    shared: Expr | None
    stream: Expr | None
    args: tuple[Expr, ...]
    span: Span
    caller: str  # the enclosing function's name ("" at file scope)
    caller_span: Span | None = None


def printable(text: str) -> str:
    """``text`` safe to show on a terminal: control characters (ESC, NUL...) and other unprintable
    ones written as ``\\xNN``/``\\uNNNN`` escapes, tabs and newlines kept."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() or c in "\t\n" else f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"
        for c in text
    )


@dataclass(frozen=True)
class Issue:
    """Something the model could not understand, at a 0-based line."""

    line: int
    message: str
    severity: Literal["error", "warning", "info"] = "warning"


@dataclass(frozen=True)
class Standalone:
    """A kernel cut out into its own translation unit.

    ``line_map[i]`` is the 0-based line of the original file that line ``i`` (0-based) of
    ``source`` came from, or -1 for generated lines.  ``options`` holds what NVRTC needs to find
    the file's own headers (``-I`` of its directory).
    """

    kernel: str
    source: str
    line_map: tuple[int, ...]
    options: tuple[str, ...] = ()

    def original_line(self, unit_line: int) -> int:
        """0-based original line of a 0-based unit line; -1 when generated or out of range."""
        return self.line_map[unit_line] if 0 <= unit_line < len(self.line_map) else -1


# ---------------------------------------------------------------------------------------- parsed text


class Parsed:
    """A CUDA file's text and parse tree, and positions in it."""

    def __init__(
        self,
        text: str | bytes,
        path: str = "",
        *,
        _tree: tree_sitter.Tree | None = None,
        _line_starts: tuple[int, ...] | None = None,
    ) -> None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        self.path = path
        self.text = text
        self.data = text.encode("utf-8", errors="surrogatepass")
        self.tree = _tree if _tree is not None else thread_parser().parse(self.data)
        if _line_starts is not None:
            self.__dict__["_line_starts"] = _line_starts

    @classmethod
    def from_file(cls, path: str | Path) -> Self:
        """Read a file; undecodable bytes become U+FFFD (reported in ``Document.issues``)."""
        p = Path(path)
        return cls(p.read_bytes(), str(p))

    # ------------------------------------------------------------------ positions

    @cached_property
    def _line_starts(self) -> tuple[int, ...]:
        return (0, *(m.end() for m in re.finditer(b"\n", self.data)))

    @property
    def line_count(self) -> int:
        return len(self._line_starts)

    def line_bytes(self, line: int) -> bytes:
        starts = self._line_starts
        if not 0 <= line < len(starts):
            return b""
        end = starts[line + 1] - 1 if line + 1 < len(starts) else len(self.data)
        return self.data[starts[line] : end]

    @cached_property
    def _ascii(self) -> bool:
        return self.data.isascii()

    def _utf16_col(self, row: int, byte_col: int) -> int:
        if self._ascii:
            return byte_col
        prefix = self.line_bytes(row)[:byte_col]
        if prefix.isascii():
            return byte_col
        return len(prefix.decode("utf-8", errors="replace").encode("utf-16-le")) // 2

    def offset(self, line: int, utf16_col: int) -> int:
        """UTF-8 byte offset of an LSP position (clamped to the document)."""
        starts = self._line_starts
        if line >= len(starts):
            return len(self.data)
        line = max(line, 0)
        raw = self.line_bytes(line)
        if raw.isascii():
            return starts[line] + min(max(utf16_col, 0), len(raw))
        chars = raw.decode("utf-8", errors="replace")
        units = 0
        for i, ch in enumerate(chars):
            if units >= utf16_col:
                return starts[line] + len(chars[:i].encode("utf-8"))
            units += 2 if ord(ch) > 0xFFFF else 1
        return starts[line] + len(raw)

    def span(self, node: tree_sitter.Node) -> Span:
        start, end = node.start_point, node.end_point
        return Span(
            start.row,
            self._utf16_col(start.row, start.column),
            end.row,
            self._utf16_col(end.row, end.column),
            node.start_byte,
            node.end_byte,
        )

    def text_in(self, span: Span) -> str:
        return self.data[span.start_byte : span.end_byte].decode("utf-8", errors="replace")

    def node_text(self, node: tree_sitter.Node) -> str:
        return self.data[node.start_byte : node.end_byte].decode("utf-8", errors="replace")

    def _point(self, offset: int) -> tuple[int, int]:
        starts = self._line_starts
        lo, hi = 0, len(starts) - 1
        while lo < hi:  # last line start <= offset
            mid = (lo + hi + 1) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo, offset - starts[lo]
