"""The CUDA source model: kernels, launch sites and dependencies of a ``.cu``/``.cuh`` file.

One :class:`Document` holds a file's text and its tree-sitter tree.  Everything else is computed
lazily from it and cached on the document, so the language server pays only for what it asks:

- :attr:`Document.kernels` — every ``__global__`` function: name, ranges, parameters, template
  parameters, ``__launch_bounds__`` and the ``//`` comment block directly above it (where a
  kernel spec lives, see :mod:`agent.spec`);
- :attr:`Document.launches` — every ``k<<<grid, block, smem, stream>>>(args)`` launch site;
- :attr:`Document.issues` — what could not be understood (syntax errors, kernels declared through
  a macro, undecodable bytes), each with a line;
- :meth:`Document.standalone` — a kernel cut out with its transitive dependencies (macros,
  types, device functions, ``__constant__``/``__device__`` globals, includes) into a translation
  unit that compiles on its own, with a line map back to the file.

Positions: lines are 0-based; columns count UTF-16 code units, as LSP does by default
(:class:`Span` also carries UTF-8 byte offsets).  :meth:`Document.apply_change` takes an LSP
change in the same coordinates and reparses incrementally through tree-sitter's edit API.  Work
after an edit is proportional to the edit: kernels, launch sites and issues of the top-level items
that lie outside the edit and outside tree-sitter's changed ranges (and whose kernels' comment
blocks it did not touch) are carried over from the previous version, moved by the lines and bytes
the edit added; only the items that meet the change are walked again (also across several edits in
a row whose versions nobody asked about).  Line starts are shifted, not rescanned.

A document is never mutated after construction: ``apply_change`` returns a new one.  Parsing
is thread-safe (one tree-sitter parser per thread).
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Literal, TypeVar

import tree_sitter
import tree_sitter_cuda

from agent.project import resolve_include

LANGUAGE = tree_sitter.Language(tree_sitter_cuda.language())

_local = threading.local()


def _parser() -> tree_sitter.Parser:
    parser: tree_sitter.Parser | None = getattr(_local, "parser", None)
    if parser is None:
        parser = _local.parser = tree_sitter.Parser(LANGUAGE)
    return parser


_LAUNCH_QUERY = tree_sitter.Query(
    LANGUAGE,
    "(call_expression function: (_) @fn (kernel_call_syntax) @config arguments: (argument_list) @args) @call",
)
_NAME_QUERY = tree_sitter.Query(
    LANGUAGE, "[(identifier) (type_identifier) (namespace_identifier) (field_identifier)] @name"
)
_IDENT = re.compile(r"[A-Za-z_]\w*")

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


# ---------------------------------------------------------------------------------------- document


class Document:
    """A CUDA file's text and parse tree, with lazily computed kernels, launches and issues."""

    def __init__(
        self,
        text: str | bytes,
        path: str = "",
        *,
        _tree: tree_sitter.Tree | None = None,
        _carry: _Carry | None = None,
        _line_starts: tuple[int, ...] | None = None,
    ) -> None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        self.path = path
        self.text = text
        self.data = text.encode("utf-8", errors="surrogatepass")
        self.tree = _tree if _tree is not None else _parser().parse(self.data)
        self._carry = _carry
        if _line_starts is not None:
            self.__dict__["_line_starts"] = _line_starts

    @classmethod
    def from_file(cls, path: str | Path) -> Document:
        """Read a file; undecodable bytes become U+FFFD and are reported in :attr:`issues`."""
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

    # ------------------------------------------------------------------ incremental edits

    def apply_change(
        self, start_line: int, start_col: int, end_line: int, end_col: int, new_text: str
    ) -> Document:
        """Replace an LSP range (UTF-16 columns) with ``new_text``; reparse incrementally."""
        start = self.offset(start_line, start_col)
        end = max(self.offset(end_line, end_col), start)
        inserted = new_text.encode("utf-8", errors="surrogatepass")
        data = self.data[:start] + inserted + self.data[end:]
        start_point = self._point(start)
        old_end_point = self._point(end)
        nl = inserted.count(b"\n")
        if nl:
            new_end_point = (start_point[0] + nl, len(inserted) - inserted.rfind(b"\n") - 1)
        else:
            new_end_point = (start_point[0], start_point[1] + len(inserted))
        tree = self.tree.copy()
        tree.edit(start, end, start + len(inserted), start_point, old_end_point, new_end_point)
        new_tree = _parser().parse(data, tree)
        starts = self._line_starts
        line_starts = (
            *starts[: start_point[0] + 1],
            *(start + m.end() for m in re.finditer(b"\n", inserted)),
            *map((len(inserted) - (end - start)).__add__, starts[old_end_point[0] + 1 :]),
        )
        edit = _Edit(start, end, start + len(inserted), new_end_point[0] - old_end_point[0])
        changed = tuple((r.start_byte, r.end_byte) for r in tree.changed_ranges(new_tree))
        return Document(
            data.decode("utf-8", errors="replace"),
            self.path,
            _tree=new_tree,
            _carry=self._carried(edit, changed),
            _line_starts=line_starts,
        )

    def replace_all(self, new_text: str) -> Document:
        """A full-text change (LSP sync kind Full, or a change without a range)."""
        return Document(new_text, self.path)

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

    # ------------------------------------------------------------------ kernels

    @cached_property
    def _parts(self) -> tuple[tuple[_Part, int, int], ...]:
        """What the top-level items of the file yield: only items whose text mentions ``__global__``
        or ``<<<`` are walked.  After an edit, items the edit did not touch come from the previous
        version (with the lines and bytes to shift them by); only the items that intersect the edit or tree-sitter's changed ranges
        are walked again."""
        carry, self._carry = self._carry, None
        if carry is None:
            return tuple(
                (p, 0, 0) for p in self._extract(_tops(self.tree.root_node, _MENTIONS.finditer(self.data)))
            )
        root = self.tree.root_node
        tops: dict[int, tree_sitter.Node] = {}
        for lo, hi in carry.dirty:
            child = _child_for_byte(root, max(lo - 1, 0))
            while child is not None and child.start_byte <= hi:
                tops.setdefault(child.start_byte, child)
                child = child.next_sibling
        fresh = self._extract(
            n for n in tops.values() if self._mentions(b"__global__", n) or self._mentions(b"<<<", n)
        )
        walked = sorted((n.start_byte, n.end_byte) for n in tops.values())
        kept = [c for c in carry.parts if not _overlaps(walked, c[0].start_byte + c[2], c[0].end_byte + c[2])]
        return tuple(sorted((*kept, *((p, 0, 0) for p in fresh)), key=lambda c: c[0].start_byte + c[2]))

    def _mentions(self, word: bytes, node: tree_sitter.Node) -> bool:
        return self.data.find(word, node.start_byte, node.end_byte) >= 0

    def _extract(self, top_level: Iterable[tree_sitter.Node]) -> tuple[_Part, ...]:
        parts = []
        for node in top_level:
            scan = _Scan(self, (node,) if self._mentions(b"__global__", node) else ())
            launches: tuple[LaunchSite, ...] = ()
            if self._mentions(b"<<<", node):
                launches = tuple(
                    self._launch(caps["call"][0], caps["fn"][0], caps["config"][0], caps["args"][0])
                    for _, caps in tree_sitter.QueryCursor(_LAUNCH_QUERY).matches(node)
                )
            if not (scan.kernels or launches or scan.issues or scan.macros):
                continue
            first = min(
                (node.start_point.row, *(k.comment[0][0] for k in scan.kernels if k.comment)),
            )
            reach = self._line_starts[first - 1] if first > 0 else 0
            parts.append(
                _Part(
                    node.start_byte,
                    node.end_byte,
                    min(reach, node.start_byte),
                    scan.kernels,
                    launches,
                    scan.issues,
                    tuple(scan.macros.items()),
                )
            )
        return tuple(parts)

    def _carried(self, edit: _Edit, changed: tuple[tuple[int, int], ...]) -> _Carry | None:
        """The extraction state to hand to the version after ``edit``: parts the edit cannot have
        touched (with the line/byte shift still to apply), and the byte ranges of the new text whose
        top-level items must be walked again.  None when this version has nothing to carry."""
        if "_parts" in self.__dict__:
            parts, dirty = self._parts, []
        elif self._carry is not None:
            parts, dirty = self._carry.parts, [edit.map(lo, hi) for lo, hi in self._carry.dirty]
        else:
            return None
        dirty += [(edit.start, edit.new_end), *changed]
        kept: list[tuple[_Part, int, int]] = []
        for p, lines, delta in parts:
            reach, begin, end = p.reach + delta, p.start_byte + delta, p.end_byte + delta
            if end < edit.start:
                pass
            elif reach > edit.old_end:
                lines, delta = lines + edit.lines, delta + edit.new_end - edit.old_end
                reach, begin, end = p.reach + delta, p.start_byte + delta, p.end_byte + delta
            else:
                dirty.append(edit.map(begin, end))
                continue
            if any(lo <= end and reach <= hi for lo, hi in changed):
                dirty.append((begin, end))
                continue
            kept.append((p, lines, delta))
        return _Carry(tuple(kept), _merged(dirty))

    @cached_property
    def _index(self) -> _Scan:
        """Every top-level item, for dependency closure (only built when a unit is cut out)."""
        return _Scan(self, self.tree.root_node.children)

    @cached_property
    def kernels(self) -> tuple[Kernel, ...]:
        return tuple(
            k
            for p, lines, delta in self._parts
            for k in _moved(p.moved_kernels, p.kernels, lines, delta, _shift_kernels)
        )

    def kernel(self, name: str) -> Kernel | None:
        return next((k for k in self.kernels if name in (k.name, k.qualified_name)), None)

    def kernel_at(self, line: int) -> Kernel | None:
        """The kernel whose definition (or spec comment) covers a 0-based line."""
        for k in self.kernels:
            first = k.comment[0][0] if k.comment else k.span.start_line
            if first <= line <= k.span.end_line:
                return k
        return None

    @cached_property
    def launches(self) -> tuple[LaunchSite, ...]:
        return tuple(
            s
            for p, lines, delta in self._parts
            for s in _moved(p.moved_launches, p.launches, lines, delta, _shift_launches)
        )

    def launches_of(self, kernel: str) -> tuple[LaunchSite, ...]:
        return tuple(s for s in self.launches if s.kernel == kernel or s.kernel.endswith("::" + kernel))

    @cached_property
    def issues(self) -> tuple[Issue, ...]:
        found = [
            Issue(i.line + lines, i.message, i.severity) for p, lines, _ in self._parts for i in p.issues
        ]
        found += _macro_kernel_issues(self.text, dict(m for p, _, _ in self._parts for m in p.macros))
        if "\ufffd" in self.text:
            line = self.text[: self.text.index("\ufffd")].count("\n")
            found.append(Issue(line, "the file is not valid UTF-8 here (bytes replaced by U+FFFD)"))
        found.extend(_syntax_issues(self))
        return tuple(sorted(found, key=lambda i: i.line))

    @cached_property
    def type_aliases(self) -> dict[str, str]:
        """``typedef __nv_bfloat16 floatX;`` / ``using real = float;`` of the file and of the
        headers it includes with quotes (found next to it, recursively): alias -> type text."""
        return _aliases(self, set())

    # ------------------------------------------------------------------ standalone units

    def standalone(
        self, kernel: Kernel, *, inline_headers: bool = False, also: Iterable[str] = ()
    ) -> Standalone:
        """The kernel and everything it needs, transitively, in file order, as one unit.
        ``also``: names the unit needs besides the kernel's own references (the template
        arguments it is instantiated with, such as a ``__device__`` function).

        ``inline_headers``: paste the file's own headers (``#include "..."`` found next to the file,
        recursively, each once) into the unit, so it compiles where they do not exist (a remote GPU
        worker); their lines map to -1.  Headers that cannot be read stay as ``#include`` lines."""
        return self._index.standalone(kernel, inline_headers, frozenset(also))

    def _launch(
        self,
        call: tree_sitter.Node,
        fn: tree_sitter.Node,
        config: tree_sitter.Node,
        args: tree_sitter.Node,
    ) -> LaunchSite:
        targs: tuple[str, ...] = ()
        name_node = fn
        if fn.type == "template_function":
            name_node = fn.child_by_field_name("name") or fn
            tlist = fn.child_by_field_name("arguments")
            if tlist is not None:
                targs = tuple(self.node_text(c) for c in tlist.named_children if c.type != "comment")
        parts: list[Expr | None] = [self._expr(c) for c in config.named_children if c.type != "comment"]
        parts += [None] * (4 - len(parts))
        caller = ""
        caller_span = None
        p = call.parent
        while p is not None:
            if p.type == "function_definition":
                caller, caller_span = _function_name(self, p), self.span(p)
                break
            p = p.parent
        return LaunchSite(
            kernel=self.node_text(name_node),
            template_args=targs,
            grid=parts[0],
            block=parts[1],
            shared=parts[2],
            stream=parts[3],
            args=tuple(self._expr(a) for a in args.named_children if a.type != "comment"),
            span=self.span(call),
            caller=caller,
            caller_span=caller_span,
        )

    def _expr(self, node: tree_sitter.Node) -> Expr:
        return Expr(self.node_text(node), self.span(node))


# ---------------------------------------------------------------------------------------- carrying over


@dataclass(frozen=True, slots=True)
class _Part:
    """What one top-level item yields, and the bytes it depends on: from the start of the line above
    it (or above its kernels' comment blocks) to its end."""

    start_byte: int
    end_byte: int
    reach: int
    kernels: tuple[Kernel, ...]
    launches: tuple[LaunchSite, ...]
    issues: tuple[Issue, ...]
    macros: tuple[tuple[str, str], ...]
    # The kernels and launch sites last moved by (lines, bytes): versions carrying the part at the
    # same offset (edits elsewhere, or undone) share them instead of moving them again.
    moved_kernels: dict[tuple[int, int], tuple[Kernel, ...]] = field(default_factory=dict, compare=False)
    moved_launches: dict[tuple[int, int], tuple[LaunchSite, ...]] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class _Edit:
    """One replacement in byte offsets: ``[start, old_end)`` became ``[start, new_end)``, adding
    ``lines`` lines (negative when it removed some)."""

    start: int
    old_end: int
    new_end: int
    lines: int

    def map(self, lo: int, hi: int) -> tuple[int, int]:
        """A byte range of the old text, in the new one (grown to cover the edit where they meet)."""
        delta = self.new_end - self.old_end
        lo = lo if lo <= self.start else lo + delta if lo >= self.old_end else self.start
        hi = hi if hi <= self.start else hi + delta if hi >= self.old_end else self.new_end
        return lo, hi


@dataclass(frozen=True, slots=True)
class _Carry:
    """A document's parts still to shift by (lines, bytes), and the byte ranges (inclusive) whose
    top-level items must be walked anew."""

    parts: tuple[tuple[_Part, int, int], ...]
    dirty: tuple[tuple[int, int], ...]


_MENTIONS = re.compile(rb"__global__|<<<")


def _tops(root: tree_sitter.Node, matches: Iterable[re.Match[bytes]]) -> list[tree_sitter.Node]:
    """The top-level nodes that contain the matches, once each, in file order."""
    tops: dict[int, tree_sitter.Node] = {}
    for m in matches:
        child = _child_for_byte(root, m.start())
        if child is not None and child.start_byte <= m.start():
            tops.setdefault(child.start_byte, child)
    return list(tops.values())


def _child_for_byte(root: tree_sitter.Node, byte: int) -> tree_sitter.Node | None:
    """The first child of ``root`` that ends after ``byte``; None past the last one (where
    py-tree-sitter's ``first_child_for_byte`` reads a null node and crashes)."""
    last = root.child(root.child_count - 1) if root.child_count else None
    return root.first_child_for_byte(byte) if last is not None and byte < last.end_byte else None


def _merged(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _overlaps(nodes: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether the node ``[start, end)`` is, or overlaps, one of the disjoint sorted nodes."""
    i = bisect.bisect_left(nodes, (start, -1))
    if i < len(nodes) and nodes[i][0] < max(end, start + 1):
        return True
    return i > 0 and nodes[i - 1][1] > start


def _shift_span(s: Span, lines: int, delta: int) -> Span:
    return Span(
        s.start_line + lines,
        s.start_col,
        s.end_line + lines,
        s.end_col,
        s.start_byte + delta,
        s.end_byte + delta,
    )


def _shift_expr(e: Expr | None, lines: int, delta: int) -> Expr | None:
    return None if e is None else Expr(e.text, _shift_span(e.span, lines, delta))


_T = TypeVar("_T")


def _moved(
    memo: dict[tuple[int, int], tuple[_T, ...]],
    values: tuple[_T, ...],
    lines: int,
    delta: int,
    shift: Callable[[tuple[_T, ...], int, int], tuple[_T, ...]],
) -> tuple[_T, ...]:
    """``values`` moved by (lines, bytes), through a one-entry memo."""
    if not values or (not lines and not delta):
        return values
    moved = memo.get((lines, delta))
    if moved is None:
        moved = shift(values, lines, delta)
        memo.clear()
        memo[lines, delta] = moved
    return moved


def _shift_kernels(kernels: tuple[Kernel, ...], lines: int, delta: int) -> tuple[Kernel, ...]:
    """Kernels moved down by ``lines`` lines and ``delta`` bytes; columns stay (a carried part never
    shares a line with an edit)."""
    return tuple(
        Kernel(
            k.name,
            k.qualified_name,
            _shift_span(k.span, lines, delta),
            _shift_span(k.name_span, lines, delta),
            _shift_span(k.body_span, lines, delta) if k.body_span is not None else None,
            tuple(
                Param(
                    q.name, q.type_text, q.base_type, q.pointer, q.const, q.restrict, q.reference,
                    _shift_span(q.span, lines, delta),
                )
                for q in k.params
            ),
            k.template_params,
            k.launch_bounds,
            k.extern_c,
            tuple((row + lines, text) for row, text in k.comment) if lines else k.comment,
        )
        for k in kernels
    )  # fmt: skip


def _shift_launches(sites: tuple[LaunchSite, ...], lines: int, delta: int) -> tuple[LaunchSite, ...]:
    return tuple(
        LaunchSite(
            s.kernel,
            s.template_args,
            _shift_expr(s.grid, lines, delta),
            _shift_expr(s.block, lines, delta),
            _shift_expr(s.shared, lines, delta),
            _shift_expr(s.stream, lines, delta),
            tuple(Expr(a.text, _shift_span(a.span, lines, delta)) for a in s.args),
            _shift_span(s.span, lines, delta),
            s.caller,
            _shift_span(s.caller_span, lines, delta) if s.caller_span is not None else None,
        )
        for s in sites
    )


# ---------------------------------------------------------------------------------------- scanning

_CONTAINERS = frozenset(
    {
        "translation_unit",
        "declaration_list",
        "preproc_if",
        "preproc_ifdef",
        "preproc_else",
        "preproc_elif",
        "preproc_elifdef",
        "linkage_specification",
        "namespace_definition",
        "template_declaration",
        "ERROR",
    }
)
_MAX_INCLUDE_DIRS = 32  # -I folders of the project a standalone unit is compiled with
_MAX_NESTING = 100  # namespaces / #if blocks / extern "C" inside each other (the walk recurses)
_TYPE_SPECIFIERS = frozenset({"struct_specifier", "class_specifier", "union_specifier", "enum_specifier"})
_NAME_NODES = frozenset({"identifier", "type_identifier", "field_identifier", "qualified_identifier"})
# Host-only headers NVRTC cannot (and a kernel need not) include: dropped from standalone units.
# (<cstdint>, <cmath>, <cstdio>... stay: sandbox.compiler ships NVRTC stand-ins for them.)
_SYSTEM_HEADERS = frozenset(
    {
        "algorithm", "array", "cassert", "chrono", "cstring", "ctime", "fstream", "functional",
        "iomanip", "iostream", "map", "memory", "numeric", "random", "set", "sstream", "stdexcept",
        "string", "thread", "tuple", "unordered_map", "utility", "vector", "assert.h", "stdlib.h",
        "cstdlib", "string.h", "time.h", "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h",
        "device_launch_parameters.h", "helper_cuda.h", "helper_functions.h",
    }
)  # fmt: skip
# Libraries and bindings a project's header pulls in for its host code (they bring <cstdint> along).
_LIBRARY_HEADERS = frozenset(
    {
        "cublas_v2.h", "cublas.h", "cublasLt.h", "cudnn.h", "curand.h", "cufft.h", "cusparse.h",
        "cusolverDn.h", "nccl.h", "nvToolsExt.h", "nvtx3/nvToolsExt.h", "mpi.h", "omp.h",
        "torch/extension.h", "torch/torch.h", "torch/python.h", "ATen/ATen.h",
        "ATen/cuda/CUDAContext.h", "c10/cuda/CUDAGuard.h", "c10/cuda/CUDAStream.h",
        "pybind11/pybind11.h", "Python.h",
    }
)  # fmt: skip
HOST_HEADERS = _SYSTEM_HEADERS | _LIBRARY_HEADERS


_MATH_MACROS = frozenset(
    {"INFINITY", "NAN", "HUGE_VAL", "HUGE_VALF", "M_PI", "M_E", "M_SQRT2", "M_LN2", "M_PI_2"}
)


@dataclass
class _Item:
    """A top-level node of the file and the names it defines (for dependency closure)."""

    node: tree_sitter.Node
    names: set[str]
    include: str = ""  # for #include: the header as written, e.g. "common.cuh" or <cuda_fp16.h>
    always: bool = False  # in every unit (`using namespace X;`)


class _Scan:
    """One pass over (part of) the top level of a document: items, kernels, macro-related issues."""

    def __init__(self, doc: Document, top_level: Iterable[tree_sitter.Node]) -> None:
        self.doc = doc
        self.items: list[_Item] = []
        self.kernels_found: list[Kernel] = []
        self.macros: dict[str, str] = {}
        self.issue_list: list[Issue] = []
        self.kernel_items: dict[int, _Item] = {}
        self.recovering = False
        self.error_depth = 0
        self.depth = 0
        self.subtrees: list[tree_sitter.Tree] = []  # keeps the nodes of recovered kernels alive
        for child in top_level:
            self._visit(child, None, (), False)
        self.kernels = tuple(self.kernels_found)
        self.issues = tuple(self.issue_list)

    # ------------------------------------------------------------------ the walk

    def _visit(self, node: tree_sitter.Node, item: _Item | None, ns: tuple[str, ...], extern_c: bool) -> None:
        t = node.type
        if item is None and _include_guard(self.doc, node):  # `#ifndef H / #define H ... #endif`: its
            for c in node.named_children[1:]:  # items stand on their own, as if at file scope
                self._visit(c, None, ns, extern_c)
            return
        if item is None and t != "ERROR" and node.is_named and t != "comment":
            item = _Item(node, set())
            self.items.append(item)
        if t in _CONTAINERS:
            if self.depth >= _MAX_NESTING:
                self.issue_list.append(
                    Issue(node.start_point.row, "nested too deeply; not analysed", "error")
                )
                return
            if t == "namespace_definition":
                name = node.child_by_field_name("name")
                ns = (*ns, self.doc.node_text(name)) if name is not None else ns
                if item is not None and name is not None:
                    item.names.add(self.doc.node_text(name))
            kernels_before = len(self.kernels_found)
            self.error_depth += t == "ERROR"
            self.depth += 1
            for c in node.children:
                if t == "template_declaration" and c.type == "template_parameter_list":
                    continue
                self._visit(c, None if t == "ERROR" else item, ns, extern_c or t == "linkage_specification")
            self.depth -= 1
            self.error_depth -= t == "ERROR"
            if t == "ERROR" and not self.error_depth:
                self._recover(node, self.kernels_found[kernels_before:])
            return
        if item is None:
            return
        names = item.names
        if t == "function_definition":
            fname = _function_name(self.doc, node)
            names.add(fname)
            if any(c.type == "__global__" for c in node.children):
                kernel = self._kernel(node, fname, ns, extern_c)
                self.kernels_found.append(kernel)
                self.kernel_items[kernel.span.start_byte] = item
        elif t in ("preproc_def", "preproc_function_def"):
            name_node = node.child_by_field_name("name")
            if name_node is not None:
                macro = self.doc.node_text(name_node)
                names.add(macro)
                value = node.child_by_field_name("value")
                self.macros[macro] = self.doc.node_text(value) if value is not None else ""
        elif t == "preproc_include":
            path = node.child_by_field_name("path")
            item.include = self.doc.node_text(path).strip() if path is not None else ""
        elif t in _TYPE_SPECIFIERS:
            self._type_names(node, names)
        elif t in ("declaration", "type_definition", "field_declaration"):
            type_node = node.child_by_field_name("type")
            if type_node is not None and type_node.type in _TYPE_SPECIFIERS:
                self._type_names(type_node, names)
            for d in node.children_by_field_name("declarator"):
                declared = _declarator_name(self.doc, d)
                if declared:
                    names.add(declared)
        elif t in (
            "alias_declaration",
            "namespace_alias_definition",
        ):  # `using T = ...;`, `namespace cg = ...;`
            name_node = node.child_by_field_name("name")
            if name_node is not None:
                names.add(self.doc.node_text(name_node))
        elif t == "using_declaration":  # `using cg::thread_block;` defines `thread_block`
            used = node.named_children[-1] if node.named_children else None
            if used is not None and not any(c.type == "namespace" for c in node.children):
                names.add(_simple_name(self.doc, used))
            else:
                item.always = True  # `using namespace X;`: what it brings is unknown, keep it

    def _type_names(self, node: tree_sitter.Node, names: set[str]) -> None:
        name_node = node.child_by_field_name("name")
        if name_node is not None:
            names.add(self.doc.node_text(name_node))
        body = node.child_by_field_name("body")
        if node.type == "enum_specifier" and body is not None:
            for e in body.named_children:
                enumerator = e.child_by_field_name("name")
                if enumerator is not None:
                    names.add(self.doc.node_text(enumerator))

    def _recover(self, error: tree_sitter.Node, found: list[Kernel]) -> None:
        """Kernels swallowed by a syntax error: reparse each ``__global__`` definition's own lines
        (tree-sitter's included ranges keep file positions) and keep the ones that parse cleanly."""
        doc = self.doc
        text = doc.data[error.start_byte : error.end_byte]
        starts = [
            error.start_byte + m.start()
            for m in re.finditer(rb"\b__global__\b", text)
            if not any(k.span.start_byte <= error.start_byte + m.start() < k.span.end_byte for k in found)
        ]
        lines = [doc._point(o)[0] for o in starts]
        for k, line in enumerate(lines):
            if self.recovering or (k > 0 and line == lines[k - 1]):
                continue
            begin = doc._line_starts[line]
            end = doc._line_starts[lines[k + 1]] if k + 1 < len(lines) else error.end_byte
            before = len(self.kernels_found)
            if end > begin:
                sub = tree_sitter.Parser(
                    LANGUAGE,
                    included_ranges=[
                        tree_sitter.Range(
                            tree_sitter.Point(line, 0), tree_sitter.Point(*doc._point(end)), begin, end
                        )
                    ],
                ).parse(doc.data)
                self.subtrees.append(sub)
                self.recovering = True
                for child in sub.root_node.children:
                    if not child.has_error:
                        self._visit(child, None, (), False)
                self.recovering = False
            if len(self.kernels_found) == before:
                self.issue_list.append(
                    Issue(line, "a __global__ kernel here does not parse; it is skipped", "error")
                )

    # ------------------------------------------------------------------ kernels

    def _kernel(self, node: tree_sitter.Node, name: str, ns: tuple[str, ...], extern_c: bool) -> Kernel:
        doc = self.doc
        outer = (
            node.parent if node.parent is not None and node.parent.type == "template_declaration" else node
        )
        template_params: tuple[TemplateParam, ...] = ()
        if outer is not node:
            tlist = outer.child_by_field_name("parameters")
            if tlist is not None:
                template_params = tuple(
                    tp for c in tlist.named_children if (tp := _template_param(doc, c)) is not None
                )
        declarator = _function_declarator(node)
        name_node = declarator.child_by_field_name("declarator") if declarator is not None else None
        params_node = declarator.child_by_field_name("parameters") if declarator is not None else None
        params = tuple(
            _param(doc, c)
            for c in (params_node.named_children if params_node is not None else ())
            if c.type in ("parameter_declaration", "optional_parameter_declaration")
        )
        bounds = next((c for c in node.children if c.type == "launch_bounds"), None)
        launch_bounds = None
        if bounds is not None:
            exprs = [doc.node_text(c) for c in bounds.named_children if c.type != "comment"]
            if exprs:
                launch_bounds = LaunchBoundsAttribute(exprs[0], exprs[1] if len(exprs) > 1 else "")
        body = node.child_by_field_name("body")
        span = doc.span(outer)
        return Kernel(
            name=name,
            qualified_name="::".join((*ns, name)),
            span=span,
            name_span=doc.span(name_node if name_node is not None else node),
            body_span=doc.span(body) if body is not None else None,
            params=params,
            template_params=template_params,
            launch_bounds=launch_bounds,
            extern_c=extern_c,
            comment=_comment_above(doc, span.start_line),
        )

    # ------------------------------------------------------------------ standalone

    def standalone(self, kernel: Kernel, inline_headers: bool, also: frozenset[str]) -> Standalone:
        doc = self.doc
        entries = self._entries(set())
        by_name: dict[str, list[int]] = {}
        for i, (_, it) in enumerate(entries):
            for n in it.names:
                by_name.setdefault(n, []).append(i)
        start = next(
            (
                i
                for i, (sc, it) in enumerate(entries)
                if sc is self and it is self.kernel_items.get(kernel.span.start_byte)
            ),
            None,
        )
        if start is None:
            return Standalone(kernel.qualified_name, "", ())
        chosen = {start}
        todo = [start]
        wanted = {start: also}
        referenced: set[str] = set()
        while todo:
            i = todo.pop()
            scan, item = entries[i]
            names = wanted.pop(i, frozenset()) | scan._references(item.node)
            referenced |= names
            for name in names:
                for j in by_name.get(name, ()):
                    # a host function is never what device code means (`rows` the launcher vs a
                    # parameter `rows`); NVRTC could not compile it either
                    if j not in chosen and not _is_host_function(entries[j][1].node):
                        chosen.add(j)
                        todo.append(j)
        for i, (_, it) in enumerate(entries):
            if it.always or (it.include and it.include.strip('<>"') not in HOST_HEADERS):
                chosen.add(i)
        local_headers = False
        base = Path(doc.path).resolve().parent if doc.path else None
        found = {
            i: resolve_include(entries[i][0].doc.path, entries[i][1].include.strip('"'))
            for i in chosen
            if entries[i][1].include.startswith('"') and entries[i][0].doc.path
        }
        inlined: set[Path] = set()
        lines: list[str] = []
        line_map: list[int] = []
        for i in sorted(chosen):
            scan, item = entries[i]
            node = item.node
            quoted = node.type == "preproc_include" and item.include.startswith('"')
            path = found.get(i)
            header = (
                _header_lines(path, inlined)
                if quoted and inline_headers and path is not None and scan is self
                else None
            )
            if header is not None:
                lines += header
                line_map += [-1] * len(header)
                continue
            local_headers = local_headers or quoted
            text = " " * node.start_point.column + scan.doc.node_text(node).rstrip("\r\n")
            after = node.next_sibling
            if node.type in _TYPE_SPECIFIERS and after is not None and after.type == ";":
                text += ";"  # `struct S {...};` at file scope: the `;` is the parent's token
            for k, line in enumerate(text.split("\n")):
                lines.append(line)
                line_map.append(node.start_point.row + k if scan is self else -1)
        dropped = any(it.include.strip('<>"') in _LIBRARY_HEADERS for _, it in entries)
        if dropped and not any(it.include.strip("<>") in ("cstdint", "stdint.h") for _, it in entries):
            # the fixed-width integers a dropped host header (torch/extension.h, ...) brought in
            lines.insert(0, "#include <cstdint>")
            line_map.insert(0, -1)
        if _MATH_MACROS & referenced:
            # nvcc includes cuda_runtime.h (and with it math.h's INFINITY, M_PI...) in every .cu
            lines.insert(0, "#include <math.h>")
            line_map.insert(0, -1)
        options: tuple[str, ...] = ()
        if local_headers and base is not None:  # the file's folder, then the project's folders it needs
            kept = [(entries[i][1].include.strip('"'), p) for i, p in found.items() if p is not None]
            options = tuple(f"-I{f}" for f in dict.fromkeys([base, *_include_folders(kept)]))
        return Standalone(kernel.qualified_name, "\n".join(lines) + "\n", tuple(line_map), options)

    def _entries(self, seen: set[Path]) -> list[tuple[_Scan, _Item]]:
        """This file's items in order, with each quoted header that holds host code (which NVRTC
        cannot compile) replaced by its own items, so the unit takes only what the kernel needs."""
        out: list[tuple[_Scan, _Item]] = []
        for it in self.items:
            header = (
                resolve_include(self.doc.path, it.include.strip('"'))
                if self.doc.path and it.include.startswith('"')
                else None
            )
            scan = _host_header(header, seen) if header is not None else None
            if scan is None:
                out.append((self, it))
            else:
                out += scan._entries(seen)
        return out

    def _references(self, node: tree_sitter.Node) -> set[str]:
        if node.type in ("preproc_def", "preproc_function_def"):
            return set(_IDENT.findall(self.doc.node_text(node))[2:])  # skip "define" and the name
        caps = tree_sitter.QueryCursor(_NAME_QUERY).captures(node)
        found = {self.doc.node_text(n) for n in caps.get("name", [])}
        # Identifiers inside #if conditions and other preprocessor text are not always nodes.
        for arg in _descendants_of_type(node, "preproc_arg"):
            found.update(_IDENT.findall(self.doc.node_text(arg)))
        return found


# ---------------------------------------------------------------------------------------- helpers


def _include_guard(doc: Document, node: tree_sitter.Node) -> bool:
    """``#ifndef NAME`` whose first line is ``#define NAME`` with no value: a header's include
    guard (``#ifndef N / #define N 4096`` is a default the build may override: kept whole)."""
    if node.type != "preproc_ifdef" or node.children[0].type != "#ifndef":
        return False
    name = node.child_by_field_name("name")
    first = node.named_children[1] if len(node.named_children) > 1 else None
    if name is None or first is None or first.type != "preproc_def" or first.child_by_field_name("value"):
        return False
    defined = first.child_by_field_name("name")
    return defined is not None and doc.node_text(defined) == doc.node_text(name)


def _host_header(path: Path, seen: set[Path]) -> _Scan | None:
    """The items of a quoted header next to the file when it has host code (a host function, a
    host-only include), each header once; None to keep its ``#include`` line as it is."""
    path = path.resolve()
    if path in seen or len(seen) >= 64 or not path.is_file():
        return None
    try:
        header = Document.from_file(path)
    except OSError:
        return None
    scan = header._index
    if not any(_is_host_item(header, it) for it in scan.items):
        return None
    seen.add(path)
    return scan


def _is_host_item(doc: Document, item: _Item) -> bool:
    node = item.node
    if node.type == "preproc_include":
        return item.include.strip("<>") in HOST_HEADERS
    if node.type == "linkage_specification":  # `extern "C" void launch(cublasHandle_t, ...);`
        return _host_declarations(node)
    return _is_host_function(node)


def _is_host_function(node: tree_sitter.Node) -> bool:
    """A function only the host can call (``constexpr`` ones serve device code's constants too)."""
    fn = node.named_children[-1] if node.type == "template_declaration" and node.named_children else node
    return fn.type == "function_definition" and not any(
        c.type in ("__device__", "__global__")
        or (c.type == "type_qualifier" and c.text in (b"constexpr", b"consteval"))
        for c in fn.children
    )


def _include_folders(includes: list[tuple[str, Path]]) -> list[Path]:
    """The ``-I`` folders that make each ``(written, found)`` quoted include, and the quoted
    includes of those headers in turn, resolve as they did here (at most :data:`_MAX_INCLUDE_DIRS`)."""
    folders: list[Path] = []
    seen: set[Path] = set()
    todo = list(includes)
    while todo and len(seen) < 64 and len(folders) < _MAX_INCLUDE_DIRS:
        written, path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        folder = path.parents[len(Path(written).parts) - 1] if Path(written).parts else path.parent
        if folder not in folders:
            folders.append(folder)
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            quoted = _QUOTED_INCLUDE.match(line)
            nested = resolve_include(path, quoted["path"]) if quoted else None
            if quoted and nested is not None:
                todo.append((quoted["path"], nested))
    return folders


def _host_declarations(node: tree_sitter.Node) -> bool:
    """An ``extern "C"`` item that declares or defines functions, none of them device code."""
    functions = False
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("__global__", "__device__", "__constant__", "__shared__", "__managed__"):
            return False
        functions = functions or n.type == "function_declarator"
        stack.extend(n.children)
    return functions


_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"(?P<path>[^"]+)"')
_ANGLE_INCLUDE = re.compile(r"^\s*#\s*include\s*<(?P<path>[^>]+)>")


def _header_lines(path: Path, inlined: set[Path]) -> list[str] | None:
    """A header's lines with its own quoted includes pasted in (each file once, like
    ``#pragma once``) and host-only includes dropped; None when it cannot be read."""
    path = path.resolve()
    if path in inlined:
        return []
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return None
    inlined.add(path)
    out: list[str] = []
    for line in text.splitlines():
        if line.strip() == "#pragma once":
            continue
        angle = _ANGLE_INCLUDE.match(line)
        if angle and angle["path"] in HOST_HEADERS:
            continue
        quoted = _QUOTED_INCLUDE.match(line)
        nested_path = resolve_include(path, quoted["path"]) if quoted else None
        nested = _header_lines(nested_path, inlined) if nested_path is not None else None
        out += [line] if nested is None else nested
    return out


def _aliases(doc: Document, seen: set[Path]) -> dict[str, str]:
    found: dict[str, str] = {}
    base = Path(doc.path).resolve().parent if doc.path else None
    stack = list(reversed(doc.tree.root_node.children))
    while stack:
        node = stack.pop()
        t = node.type
        if t in _CONTAINERS or t == "namespace_definition":
            stack.extend(reversed(node.children))
        elif t == "type_definition":
            type_node = node.child_by_field_name("type")
            for d in node.children_by_field_name("declarator"):
                if type_node is not None and d.type == "type_identifier":
                    found.setdefault(doc.node_text(d), _squash(doc.node_text(type_node)))
        elif t == "alias_declaration":
            name_node, type_node = node.child_by_field_name("name"), node.child_by_field_name("type")
            if name_node is not None and type_node is not None:
                found.setdefault(doc.node_text(name_node), _squash(doc.node_text(type_node)))
        elif t == "preproc_include" and base is not None and len(seen) < 64:
            path = node.child_by_field_name("path")
            written = doc.node_text(path).strip() if path is not None else ""
            header = resolve_include(doc.path, written.strip('"')) if written.startswith('"') else None
            if header is not None and header not in seen:
                seen.add(header)
                try:
                    included = Document(header.read_bytes().decode("utf-8", errors="replace"), str(header))
                except OSError:
                    continue
                for alias, value in _aliases(included, seen).items():
                    found.setdefault(alias, value)
    return found


def _macro_kernel_issues(text: str, macros: dict[str, str]) -> list[Issue]:
    """Uses of macros that expand to ``__global__``: kernels the model cannot see."""
    found: list[Issue] = []
    for name, body in macros.items():
        if "__global__" not in body:
            continue
        for m in re.finditer(rf"^(?!\s*#).*\b{re.escape(name)}\b", text, re.M):
            found.append(
                Issue(
                    text.count("\n", 0, m.start()),
                    f"kernel declared through macro {name} (expands to __global__) is not analysed; "
                    "write __global__ in the declaration",
                )
            )
    return found


def _descendants_of_type(node: tree_sitter.Node, node_type: str) -> Iterator[tree_sitter.Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == node_type:
            yield n
        elif n.type.startswith("preproc") or n.type in ("compound_statement", "declaration_list"):
            stack.extend(n.children)


def _function_declarator(node: tree_sitter.Node) -> tree_sitter.Node | None:
    d = node.child_by_field_name("declarator")
    while d is not None and d.type != "function_declarator":
        d = d.child_by_field_name("declarator")
    return d


def _function_name(doc: Document, node: tree_sitter.Node) -> str:
    d = _function_declarator(node)
    name = d.child_by_field_name("declarator") if d is not None else None
    return _simple_name(doc, name) if name is not None else ""


def _declarator_name(doc: Document, node: tree_sitter.Node) -> str:
    d: tree_sitter.Node | None = node
    while d is not None:
        if d.type in _NAME_NODES or d.type == "template_function":
            return _simple_name(doc, d)
        if d.type == "parenthesized_declarator":  # `typedef float (*fn)(float);`
            d = d.named_children[0] if d.named_children else None
            continue
        d = d.child_by_field_name("declarator")
    return ""


def _simple_name(doc: Document, node: tree_sitter.Node) -> str:
    """``apply`` for ``apply<Mode::Add>`` (a specialisation) or ``ops::apply`` (out of line)."""
    n: tree_sitter.Node | None = node
    while n is not None and n.type in ("template_function", "qualified_identifier"):
        n = n.child_by_field_name("name")
    return doc.node_text(n if n is not None else node)


def _squash(text: str) -> str:
    return " ".join(text.split())


def _param(doc: Document, node: tree_sitter.Node) -> Param:
    type_node = node.child_by_field_name("type")
    const = any(c.type == "type_qualifier" and doc.node_text(c) == "const" for c in node.children)
    restrict = False
    pointer = 0
    reference = False
    name_node: tree_sitter.Node | None = None
    d = node.child_by_field_name("declarator")
    while d is not None:
        if d.type in _NAME_NODES:
            name_node = d
            break
        if d.type in ("pointer_declarator", "abstract_pointer_declarator"):
            pointer += 1
            restrict = restrict or any(
                c.type == "type_qualifier" and "restrict" in doc.node_text(c) for c in d.children
            )
        elif d.type in ("array_declarator", "abstract_array_declarator"):
            pointer += 1
        elif d.type in ("reference_declarator", "abstract_reference_declarator"):
            reference = True
            d = next((c for c in d.named_children), None)
            continue
        d = d.child_by_field_name("declarator")
    full = doc.node_text(node)
    if name_node is not None:
        a = name_node.start_byte - node.start_byte
        b = name_node.end_byte - node.start_byte
        raw = doc.data[node.start_byte : node.end_byte]
        type_text = (raw[:a] + raw[b:]).decode("utf-8", errors="replace")
    else:
        type_text = full
    return Param(
        name=doc.node_text(name_node) if name_node is not None else "",
        type_text=_squash(type_text),
        base_type=_squash(doc.node_text(type_node)) if type_node is not None else "",
        pointer=pointer,
        const=const,
        restrict=restrict,
        reference=reference,
        span=doc.span(node),
    )


def _template_param(doc: Document, node: tree_sitter.Node) -> TemplateParam | None:
    t = node.type
    if t in ("type_parameter_declaration", "variadic_type_parameter_declaration"):
        name = next((c for c in node.named_children if c.type == "type_identifier"), None)
        return TemplateParam("type", doc.node_text(name) if name is not None else "")
    if t == "optional_type_parameter_declaration":
        name = node.child_by_field_name("name")
        default = node.child_by_field_name("default_type")
        return TemplateParam(
            "type",
            doc.node_text(name) if name is not None else "",
            default=doc.node_text(default) if default is not None else "",
        )
    if t in ("parameter_declaration", "optional_parameter_declaration"):
        d = node.child_by_field_name("declarator")
        type_node = node.child_by_field_name("type")
        default = node.child_by_field_name("default_value")
        return TemplateParam(
            "value",
            _declarator_name(doc, d) if d is not None else "",
            _squash(doc.node_text(type_node)) if type_node is not None else "",
            doc.node_text(default) if default is not None else "",
        )
    return None


def _comment_above(doc: Document, line: int) -> tuple[tuple[int, str], ...]:
    found: list[tuple[int, str]] = []
    row = line - 1
    while row >= 0:
        raw = doc.line_bytes(row).decode("utf-8", errors="replace").strip()
        if not raw.startswith("//"):
            break
        found.append((row, raw[2:]))
        row -= 1
    return tuple(reversed(found))


def _syntax_issues(doc: Document, limit: int = 20) -> list[Issue]:
    """ERROR and MISSING nodes, pruned to subtrees that contain errors, first ``limit`` of them."""
    found: list[Issue] = []
    stack = [doc.tree.root_node]
    while stack and len(found) < limit:
        n = stack.pop()
        if n.is_missing:
            found.append(Issue(n.start_point.row, f"syntax error: missing {n.type}", "error"))
        elif n.is_error:
            snippet = _squash(doc.node_text(n))[:40]
            found.append(Issue(n.start_point.row, f"syntax error near `{snippet}`", "error"))
        elif n.has_error:
            stack.extend(reversed(n.children))
    return found
