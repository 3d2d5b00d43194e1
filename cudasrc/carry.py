"""Carrying a document's analysis over an edit: what each top-level item yielded (:class:`Part`),
the edit in bytes (:class:`Edit`), the parts an edit did not touch (:class:`Carry`) and moving
their kernels and launch sites by the lines and bytes the edit added."""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TypeVar

import tree_sitter

from cudasrc.syntax import Expr, Issue, Kernel, LaunchSite, Param, Span


@dataclass(frozen=True, slots=True)
class Part:
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
class Edit:
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
class Carry:
    """A document's parts still to shift by (lines, bytes), and the byte ranges (inclusive) whose
    top-level items must be walked anew."""

    parts: tuple[tuple[Part, int, int], ...]
    dirty: tuple[tuple[int, int], ...]


MENTIONS = re.compile(rb"__global__|<<<")


def top_nodes(root: tree_sitter.Node, matches: Iterable[re.Match[bytes]]) -> list[tree_sitter.Node]:
    """The top-level nodes that contain the matches, once each, in file order."""
    tops: dict[int, tree_sitter.Node] = {}
    for m in matches:
        child = child_for_byte(root, m.start())
        if child is not None and child.start_byte <= m.start():
            tops.setdefault(child.start_byte, child)
    return list(tops.values())


def child_for_byte(root: tree_sitter.Node, byte: int) -> tree_sitter.Node | None:
    """The first child of ``root`` that ends after ``byte``; None past the last one (where
    py-tree-sitter's ``first_child_for_byte`` reads a null node and crashes)."""
    last = root.child(root.child_count - 1) if root.child_count else None
    return root.first_child_for_byte(byte) if last is not None and byte < last.end_byte else None


def merged_ranges(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def overlaps_any(nodes: list[tuple[int, int]], start: int, end: int) -> bool:
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


def moved_values(
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


def shift_kernels(kernels: tuple[Kernel, ...], lines: int, delta: int) -> tuple[Kernel, ...]:
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


def shift_launches(sites: tuple[LaunchSite, ...], lines: int, delta: int) -> tuple[LaunchSite, ...]:
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
