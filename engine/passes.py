"""Structural passes: the interface, the emitter, and the adapter the search composes.

A pass is one file holding a :class:`Pass` subclass:

- ``match(view) -> Match | NotApplicable(reason)`` decides on the read-only
  :class:`~engine.view.KernelView` whether (and where) the rewrite applies; a
  :class:`Match` carries what ``rewrite`` needs (nodes of the view, names, reductions);
- ``rewrite(match, params) -> Transformed | NotApplicable`` instantiates the rewrite for one point of
  the pass's declared parameter space ``space`` (best guess first: the search tries it in the
  first batch) through an :class:`Emitter`;
- ``space_for(device)`` may widen the space for the device (e.g. a grid capped at a few blocks
  per SM); ``accepts(params)`` says which values ``rewrite`` instantiates;
- one entry in :data:`engine.registry.PASSES` makes the search try it.

A pass matches the *normalized* subject (:mod:`engine.frontend`: device functions
inlined, loops in canonical form; macros, constants, aliases and scopes resolved in the view),
so it sees one spelling of each computation, and reads element types through
``view.element_type(name)``.

:class:`Apply` (a pass with one parameter value) is a :class:`~engine.Transform`, so
passes compose with every other transformation — and with each other: a
:class:`~engine.compose.Chain` applies several, each matched on the previous one's
result —, and an exception inside a pass becomes ``NotApplicable("internal error: ...")``
through :func:`engine.safe_apply`.
"""

from __future__ import annotations

import abc
import difflib
import functools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Generic, TypeVar

import tree_sitter

from cudasrc.launch import LaunchChange
from cudasrc.source import Document
from engine import NotApplicable, Outcome, Subject, Transform, Transformed, _rebuild
from engine.frontend import expanded_lines
from engine.view import KernelView
from sandbox.contract import DeviceInfo

Node = tree_sitter.Node
PAD = "    "


@dataclass(frozen=True)
class Match:
    """What a pass found; subclasses add their fields."""

    view: KernelView


M = TypeVar("M", bound=Match)


class Pass(abc.ABC, Generic[M]):
    """A structural rewrite: ``match`` on the view, ``rewrite`` for one parameter value."""

    name: ClassVar[str]
    space: ClassVar[tuple[Hashable, ...]]  # the parameter values the search tries, best first
    leads: ClassVar[bool] = True  # a matching pass gets a composite guess of its own in the first batch

    @abc.abstractmethod
    def match(self, view: KernelView) -> M | NotApplicable: ...

    @abc.abstractmethod
    def rewrite(self, match: M, params: Hashable) -> Outcome: ...

    def guess(self, match: M) -> Hashable:
        """The parameter value to try first on this match (the search's first batch)."""
        return self.space[0]

    def space_for(self, device: DeviceInfo | None) -> tuple[Hashable, ...]:
        """The parameter values to search on ``device`` (its SM count, ...); ``space`` by default."""
        return self.space

    def accepts(self, params: Hashable) -> bool:
        """Whether ``params`` is a parameter value of this pass (those of :meth:`space_for` and
        any other the pass can instantiate)."""
        return params in self.space


@dataclass(frozen=True)
class Apply(Transform):
    """A pass with one of its parameter values, as a transformation of a :class:`Subject`."""

    pass_: Pass[Any] = field(compare=False, hash=False)
    params: Hashable
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.pass_.name)

    def apply(self, subject: Subject) -> Outcome:
        normalized = subject.normalized
        found = self.pass_.match(normalized.view)
        if isinstance(found, NotApplicable):
            return found
        if not self.pass_.accepts(self.params):
            return NotApplicable(f"{self.params!r} is not in the parameter space of {self.name}")
        out = self.pass_.rewrite(found, self.params)
        if isinstance(out, NotApplicable) or normalized is subject:
            return out
        code = lifted(subject.code, normalized.code, out.code)
        if code is None:
            code = restored(subject.code, normalized.code, out.code, expanded_lines(subject))
        return replace(out, code=code)

    def __repr__(self) -> str:
        return repr(self.params) if isinstance(self.params, Pass) else f"{self.name}({self.params!r})"


# names a fresh name is never spelled as: C++ keywords and the CUDA built-ins a rewrite may call
_RESERVED = frozenset(
    [
        "auto",
        "bool",
        "break",
        "case",
        "char",
        "const",
        "constexpr",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extern",
        "float",
        "for",
        "goto",
        "if",
        "inline",
        "int",
        "long",
        "register",
        "return",
        "short",
        "signed",
        "sizeof",
        "static",
        "struct",
        "switch",
        "typedef",
        "union",
        "unsigned",
        "void",
        "volatile",
        "while",
        "new",
        "delete",
        "this",
        "template",
        "typename",
        "namespace",
        "using",
        "class",
        "public",
        "private",
        "true",
        "false",
        "nullptr",
        "threadIdx",
        "blockIdx",
        "blockDim",
        "gridDim",
        "warpSize",
        "min",
        "max",
        "abs",
        "exp",
        "log",
        "sqrt",
        "pow",
        "floor",
        "ceil",
        "fma",
    ]
)


@functools.lru_cache(maxsize=16)
def _unit_names(text: str) -> frozenset[str]:
    """Every name the kernel's unit spells (macros, types, functions, globals)."""
    if not text:
        return frozenset()
    doc = Document(text)
    out, stack = set(), [doc.tree.root_node]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type in ("identifier", "field_identifier", "type_identifier"):
            out.add(doc.node_text(n))
    return frozenset(out)


class Emitter:
    """Builds a rewrite's text: fresh names that collide with no identifier in use, indentation,
    shared helper functions emitted once before the kernel, and the splice into the subject."""

    def __init__(self, view: KernelView) -> None:
        self.view = view
        context = getattr(view.subject, "context", "")
        self.taken = (
            set(view.identifiers) | _unit_names(context if isinstance(context, str) else "") | _RESERVED
        )
        self.helpers: dict[str, str] = {}  # name -> definition, in emission order
        self.edits: list[tuple[int, int, str]] = []

    def fresh(self, stem: str) -> str:
        """A name a person would write: ``stem`` itself (``tile``, ``lane``) where no name of the
        kernel or its unit is spelled so; ``ca_<stem>`` (then ``ca_<stem>_2`` ...) only where it
        would clash."""
        name, k = stem, 2
        if name in self.taken:
            name = f"ca_{stem}"
        while name in self.taken:
            name, k = f"ca_{stem}_{k}", k + 1
        self.taken.add(name)
        return name

    def helper(self, name: str, definition: str) -> str:
        """Ensure ``definition`` (a ``__device__`` function called ``name``) precedes the kernel
        once; the name is kept when the code already defines exactly this helper."""
        if name in self.helpers:
            return name
        if definition in self.view.subject.code:
            return name
        final = name
        k = 2
        while final in self.taken:
            final, k = f"{name}_{k}", k + 1
        self.taken.add(final)
        self.helpers[final] = definition.replace(name, final)
        return final

    def edit(self, start: int, end: int, text: str) -> None:
        """Replace the subject's bytes ``start:end`` by ``text``."""
        self.edits.append((start, end, text))

    def substitute(self, node: Node, replace_fn: Callable[[Node], str | None]) -> str:
        """``node``'s text with every subtree for which ``replace_fn`` answers a string replaced
        by it (outermost first)."""
        return _rebuild(self.view.subject, node, replace_fn)

    def indent(self, node: Node) -> str:
        line = self.view.subject.doc.line_bytes(node.start_point.row).decode("utf-8", errors="replace")
        return line[: len(line) - len(line.lstrip())]

    def unit(self, outer: Node, inner: Node) -> str:
        """The file's indentation step: what ``inner`` (a statement nested one level in
        ``outer``) is indented by beyond ``outer`` (a tab, two or four spaces ...); four spaces
        when the two share a line."""
        a, b = self.indent(outer), self.indent(inner)
        return b[len(a) :] if b.startswith(a) and len(b) > len(a) else PAD

    def replace(self, node: Node, text: str) -> None:
        self.edits.append((node.start_byte, node.end_byte, text))

    def insert_before(self, node: Node, text: str) -> None:
        self.edits.append((node.start_byte, node.start_byte, text))

    def insert_after(self, node: Node, text: str) -> None:
        self.edits.append((node.end_byte, node.end_byte, text))

    def code(self) -> str:
        """The subject's code with the edits applied and the helpers before the kernel."""
        subject = self.view.subject
        edits = list(self.edits)
        if self.helpers:
            start = subject.kernel.span.start_byte
            edits.insert(0, (start, start, "".join(h.rstrip() + "\n\n" for h in self.helpers.values())))
        data, out, pos = subject.doc.data, [], 0
        for start, end, text in sorted(edits, key=lambda e: (e[0], e[1])):  # stable: inserts keep their order
            if start < pos:
                raise ValueError("overlapping edits")
            out += [data[pos:start], text.encode()]
            pos = end
        out.append(data[pos:])
        return b"".join(out).decode("utf-8", errors="replace")

    def rewrite(self, description: str, launch: LaunchChange | None = None) -> Transformed:
        return Transformed(self.code(), description, launch)


class Parameterized(Pass[M], Transform):
    """A pass whose instances are its own parameter values (``Vectorize(16, 2)``): a frozen
    dataclass of the parameters.  An instance is a transformation by itself, and the registry
    holds a default instance whose ``space_for(device)`` lists the instances to search."""

    def accepts(self, params: Hashable) -> bool:
        return type(params) is type(self)

    def apply(self, subject: Subject) -> Outcome:
        return Apply(self, self).apply(subject)

    @abc.abstractmethod
    def rewrite(self, match: M, params: Hashable) -> Outcome: ...


def lifted(original: str, normalized: str, rewritten: str) -> str | None:
    """``rewritten`` (a pass's edits of ``normalized``, the front end's normalization of
    ``original``) as edits of ``original``, so that the normalization never reaches the diff: the
    user's device-function calls, loop declarations and ``while`` loops stay as written wherever
    the pass did not change them.  None where an edit touches a line the normalization changed, or
    brings in a name only the normalization introduced (an inlined function's locals): the
    rewrite then keeps the normalized text, as the pass wrote it.

    Lines are aligned by a diff (``difflib``): ``original`` -> ``normalized`` gives which lines of
    the normalized text are the user's, ``normalized`` -> ``rewritten`` the pass's hunks."""
    o_lines = original.splitlines(keepends=True)
    n_lines = normalized.splitlines(keepends=True)
    r_lines = rewritten.splitlines(keepends=True)
    user: dict[int, int] = {}  # line of normalized -> the same line of original
    for tag, i1, i2, j1, _ in difflib.SequenceMatcher(None, o_lines, n_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            user.update({j1 + k: i1 + k for k in range(i2 - i1)})
    user[len(n_lines)] = len(o_lines)
    introduced = _unit_names(normalized) - _unit_names(original)
    out: list[str] = []
    pos = 0  # next line of original to copy
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, n_lines, r_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        span = range(i1, i2)
        if any(i not in user for i in span):
            return None  # the pass changed what the normalization wrote
        if i1 == i2:  # an insertion: before the user's line i1, or after the user's line i1 - 1
            at = user.get(i1, user[i1 - 1] + 1 if i1 - 1 in user else None)
        else:
            at = user[i1]
            if [user[i] for i in span] != list(range(at, at + len(span))):
                return None
        if at is None or at < pos:
            return None
        new = "".join(r_lines[j1:j2])
        if introduced & _unit_names(new):
            return None
        out += [*o_lines[pos:at], new]
        pos = at + len(span)
    out += o_lines[pos:]
    return "".join(out)


INLINED = "// cuda-agent: "  # the front end's mark on a device function it inlined (``... f inlined``)


def restored(
    original: str, normalized: str, rewritten: str, expanded: Mapping[str, str] | None = None
) -> str:
    """``rewritten`` with every device-function call the front end inlined put back as the user
    wrote it, where the pass carried the inlined block over unchanged (only its indentation may
    differ): a rewrite that re-emits the whole body (a grid-stride loop around it) still calls
    the user's helper.  Likewise each line whose macros the front end expanded (``expanded``:
    :func:`engine.frontend.expanded_lines`) is put back as written where the pass carried it over
    unchanged: ``GET2D(a, r, c, YC) = s;``, not ``(a)[(r)*(YC) + (c)] = s;``."""
    o_lines = original.splitlines(keepends=True)
    n_lines = normalized.splitlines(keepends=True)
    r_lines = rewritten.splitlines(keepends=True)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, o_lines, n_lines, autojunk=False).get_opcodes():
        block = n_lines[j1:j2]
        if tag != "replace" or not any(INLINED in x and x.rstrip().endswith("inlined") for x in block):
            continue
        want = [x.strip() for x in block]
        for at in range(len(r_lines) - len(block) + 1):
            if [x.strip() for x in r_lines[at : at + len(block)]] != want:
                continue
            have, was = r_lines[at], block[0]
            extra = _indent(have)[len(_indent(was)) :] if _indent(have).startswith(_indent(was)) else ""
            r_lines[at : at + len(block)] = [extra + x if x.strip() else x for x in o_lines[i1:i2]]
            break
    for at, line in enumerate(r_lines):
        written = (expanded or {}).get(line.strip())
        if written is not None:
            r_lines[at] = _indent(line) + written + line[len(line.rstrip()) :]
    return "".join(r_lines)


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]
