"""The CUDA source model: kernels, launch sites and dependencies of a ``.cu``/``.cuh`` file.

One :class:`Document` holds a file's text and its tree-sitter tree.  Everything else is computed
lazily from it and cached on the document, so the language server pays only for what it asks:

- :attr:`Document.kernels` — every ``__global__`` function: name, ranges, parameters, template
  parameters, ``__launch_bounds__`` and the ``//`` comment block directly above it (where a
  kernel spec lives, see :mod:`cudasrc.specs`);
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

The parts: :mod:`cudasrc.syntax` (the parser, positions, the values), :mod:`cudasrc.scan` (the walk of
the top level, kernels, standalone units), :mod:`cudasrc.carry` (what an edit carries over).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cached_property

import tree_sitter

from cudasrc.carry import (
    MENTIONS,
    Carry,
    Edit,
    Part,
    child_for_byte,
    merged_ranges,
    moved_values,
    overlaps_any,
    shift_kernels,
    shift_launches,
    top_nodes,
)
from cudasrc.scan import (
    Scan,
    function_name,
    integer_constants_of,
    macro_kernel_issues,
    syntax_issues,
    type_aliases_of,
)
from cudasrc.syntax import LAUNCH_QUERY, Expr, Issue, Kernel, LaunchSite, Parsed, Standalone, thread_parser

# ---------------------------------------------------------------------------------------- document


class Document(Parsed):
    """A CUDA file's text and parse tree, with lazily computed kernels, launches and issues."""

    def __init__(
        self,
        text: str | bytes,
        path: str = "",
        *,
        _tree: tree_sitter.Tree | None = None,
        _carry: Carry | None = None,
        _line_starts: tuple[int, ...] | None = None,
    ) -> None:
        super().__init__(text, path, _tree=_tree, _line_starts=_line_starts)
        self._carry = _carry

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
        new_tree = thread_parser().parse(data, tree)
        starts = self._line_starts
        line_starts = (
            *starts[: start_point[0] + 1],
            *(start + m.end() for m in re.finditer(b"\n", inserted)),
            *map((len(inserted) - (end - start)).__add__, starts[old_end_point[0] + 1 :]),
        )
        edit = Edit(start, end, start + len(inserted), new_end_point[0] - old_end_point[0])
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

    # ------------------------------------------------------------------ kernels

    @cached_property
    def _parts(self) -> tuple[tuple[Part, int, int], ...]:
        """What the top-level items of the file yield: only items whose text mentions ``__global__``
        or ``<<<`` are walked.  After an edit, items the edit did not touch come from the previous
        version (with the lines and bytes to shift them by); only the items that intersect the edit or tree-sitter's changed ranges
        are walked again."""
        carry, self._carry = self._carry, None
        if carry is None:
            return tuple(
                (p, 0, 0) for p in self._extract(top_nodes(self.tree.root_node, MENTIONS.finditer(self.data)))
            )
        root = self.tree.root_node
        tops: dict[int, tree_sitter.Node] = {}
        for lo, hi in carry.dirty:
            child = child_for_byte(root, max(lo - 1, 0))
            while child is not None and child.start_byte <= hi:
                tops.setdefault(child.start_byte, child)
                child = child.next_sibling
        fresh = self._extract(
            n for n in tops.values() if self._mentions(b"__global__", n) or self._mentions(b"<<<", n)
        )
        walked = sorted((n.start_byte, n.end_byte) for n in tops.values())
        kept = [
            c for c in carry.parts if not overlaps_any(walked, c[0].start_byte + c[2], c[0].end_byte + c[2])
        ]
        return tuple(sorted((*kept, *((p, 0, 0) for p in fresh)), key=lambda c: c[0].start_byte + c[2]))

    def _mentions(self, word: bytes, node: tree_sitter.Node) -> bool:
        return self.data.find(word, node.start_byte, node.end_byte) >= 0

    def _extract(self, top_level: Iterable[tree_sitter.Node]) -> tuple[Part, ...]:
        parts = []
        for node in top_level:
            scan = Scan(self, (node,) if self._mentions(b"__global__", node) else ())
            launches: tuple[LaunchSite, ...] = ()
            if self._mentions(b"<<<", node):
                launches = tuple(
                    self._launch(caps["call"][0], caps["fn"][0], caps["config"][0], caps["args"][0])
                    for _, caps in tree_sitter.QueryCursor(LAUNCH_QUERY).matches(node)
                )
            if not (scan.kernels or launches or scan.issues or scan.macros):
                continue
            first = min(
                (node.start_point.row, *(k.comment[0][0] for k in scan.kernels if k.comment)),
            )
            reach = self._line_starts[first - 1] if first > 0 else 0
            parts.append(
                Part(
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

    def _carried(self, edit: Edit, changed: tuple[tuple[int, int], ...]) -> Carry | None:
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
        kept: list[tuple[Part, int, int]] = []
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
        return Carry(tuple(kept), merged_ranges(dirty))

    @cached_property
    def _index(self) -> Scan:
        """Every top-level item, for dependency closure (only built when a unit is cut out)."""
        return Scan(self, self.tree.root_node.children)

    @cached_property
    def kernels(self) -> tuple[Kernel, ...]:
        return tuple(
            k
            for p, lines, delta in self._parts
            for k in moved_values(p.moved_kernels, p.kernels, lines, delta, shift_kernels)
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
            for s in moved_values(p.moved_launches, p.launches, lines, delta, shift_launches)
        )

    def launches_of(self, kernel: str) -> tuple[LaunchSite, ...]:
        return tuple(s for s in self.launches if s.kernel == kernel or s.kernel.endswith("::" + kernel))

    @cached_property
    def issues(self) -> tuple[Issue, ...]:
        found = [
            Issue(i.line + lines, i.message, i.severity) for p, lines, _ in self._parts for i in p.issues
        ]
        found += macro_kernel_issues(self.text, dict(m for p, _, _ in self._parts for m in p.macros))
        if "\ufffd" in self.text:
            line = self.text[: self.text.index("\ufffd")].count("\n")
            found.append(Issue(line, "the file is not valid UTF-8 here (bytes replaced by U+FFFD)"))
        found.extend(syntax_issues(self))
        return tuple(sorted(found, key=lambda i: i.line))

    @cached_property
    def type_aliases(self) -> dict[str, str]:
        """``typedef __nv_bfloat16 floatX;`` / ``using real = float;`` of the file and of the
        headers it includes with quotes (found next to it, recursively): alias -> type text."""
        return type_aliases_of(self, set())

    @cached_property
    def integer_constants(self) -> dict[str, int]:
        """The file's integer macros and file-scope ``const``/``constexpr`` integers, folded:
        name -> value (what spec expressions and the optimizer's index analysis may name)."""
        return integer_constants_of(self)

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
                caller, caller_span = function_name(self, p), self.span(p)
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
