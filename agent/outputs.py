"""What a program produced, compared before and after a rewrite (``cuda-agent speedup``).

A program's results are its standard output and the files it writes (``--output FILE``).  They
are compared the way a person reads them:

- **text** (standard output, and a file whose bytes are UTF-8): split into numbers and the text
  between them; the text must be identical, every number within ``atol + rtol * |before|`` of its
  old value (NaN equals NaN, infinities must match), and there must be as many numbers;
- **raw arrays** (``FILE:float32``, ``float64``, ``int32``...): the same element count, each
  element within the tolerance (integers exactly);
- **anything else** (``FILE:bytes``, or a file that is not text): byte for byte.

A difference is a value (:class:`Difference`) that says where (line and column, or element) and
by how much, never an exception.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

OutputKind = Literal["auto", "text", "bytes", "float16", "float32", "float64", "int32", "int64", "uint8"]
_ARRAY_KINDS = ("float16", "float32", "float64", "int32", "int64", "uint8")
KINDS: tuple[str, ...] = ("auto", "text", "bytes", *_ARRAY_KINDS)

# A number as programs print them: 12, -3.5, 1e-3, .5, 2.f is text "2." then "f"; nan and inf too.
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf(?:inity)?)", re.I)


@dataclass(frozen=True)
class OutputTolerance:
    """How far a number may move: ``|after - before| <= atol + rtol * |before|``."""

    rtol: float = 1e-5
    atol: float = 1e-8

    def close(self, before: float, after: float) -> bool:
        if math.isnan(before) or math.isnan(after):
            return math.isnan(before) and math.isnan(after)
        if math.isinf(before) or math.isinf(after):
            return before == after
        return abs(after - before) <= self.atol + self.rtol * abs(before)


@dataclass(frozen=True)
class OutputFile:
    """A file the program writes, relative to its working folder, and how to compare it."""

    path: str
    kind: OutputKind = "auto"

    @classmethod
    def parse(cls, text: str) -> OutputFile:
        """``FILE`` or ``FILE:KIND`` (KIND one of :data:`KINDS`); ValueError otherwise."""
        path, sep, kind = text.rpartition(":")
        if sep and kind in KINDS and path:
            return cls(path, kind)  # type: ignore[arg-type]
        if not text:
            raise ValueError("an output file needs a name")
        return cls(text)


@dataclass(frozen=True)
class Difference:
    """Where an output differs: ``what`` (``stdout`` or a file), ``where`` (``line 3, column 9``,
    ``element 17``, ``size``), the values before and after as text."""

    what: str
    where: str
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.what}: {self.where}: {self.before!r} became {self.after!r}"


def _tokens(text: str) -> list[tuple[int, bool, str]]:
    """(offset, is_number, text) pieces of ``text``: numbers and the runs of text between them."""
    out: list[tuple[int, bool, str]] = []
    pos = 0
    for m in _NUMBER.finditer(text):
        # a number glued to a word (x86, sm_90, float4) is part of the word
        if m.start() > 0 and (text[m.start() - 1].isalnum() or text[m.start() - 1] == "_"):
            continue
        glued = m.end() < len(text) and (text[m.end()].isalpha() or text[m.end()] == "_")
        if glued and not m.group().lower().startswith(("nan", "inf")) and text[m.end()] not in "eE":
            continue
        if m.start() > pos:
            out.append((pos, False, text[pos : m.start()]))
        out.append((m.start(), True, m.group()))
        pos = m.end()
    if pos < len(text):
        out.append((pos, False, text[pos:]))
    return out


def _place(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


def compare_text(what: str, before: str, after: str, tol: OutputTolerance) -> Difference | None:
    """The first difference between two texts read as numbers and words (None: equal)."""
    a, b = _tokens(before), _tokens(after)
    for (off, num_a, ta), (_, num_b, tb) in zip(a, b, strict=False):
        if num_a != num_b or (not num_a and ta != tb):
            return Difference(what, _place(before, off), ta[:60], tb[:60])
        if num_a and not tol.close(float(ta), float(tb)):
            return Difference(what, _place(before, off), ta, tb)
    if len(a) != len(b):
        shorter, longer = (a, b) if len(a) < len(b) else (b, a)
        extra = longer[len(shorter)]
        where = _place(before if longer is a else after, extra[0])
        return Difference(
            what,
            f"{where} (one output ends earlier)",
            *((extra[2][:60], "") if longer is a else ("", extra[2][:60])),
        )
    return None


def compare_arrays(
    what: str, before: bytes, after: bytes, kind: str, tol: OutputTolerance
) -> Difference | None:
    dtype = np.dtype(kind)
    if len(before) != len(after) or len(before) % dtype.itemsize:
        return Difference(what, "size", f"{len(before)} bytes", f"{len(after)} bytes")
    x = np.frombuffer(before, dtype=dtype)
    y = np.frombuffer(after, dtype=dtype)
    if dtype.kind in "iu":
        bad = np.flatnonzero(x != y)
    else:
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        with np.errstate(invalid="ignore"):
            ok = (
                (np.abs(yf - xf) <= tol.atol + tol.rtol * np.abs(xf))
                | (np.isnan(xf) & np.isnan(yf))
                | (xf == yf)
            )
        bad = np.flatnonzero(~ok)
    if bad.size == 0:
        return None
    i = int(bad[0])
    return Difference(
        what, f"element {i} ({bad.size} of {x.size} differ)", repr(x[i].item()), repr(y[i].item())
    )


def compare_output(
    what: str, before: bytes | None, after: bytes | None, kind: str, tol: OutputTolerance
) -> Difference | None:
    """Compare one output (None: the program did not write it)."""
    if before is None or after is None:
        if before is None and after is None:
            return None
        return Difference(
            what, "file", "absent" if before is None else "written", "absent" if after is None else "written"
        )
    if kind in _ARRAY_KINDS:
        return compare_arrays(what, before, after, kind, tol)
    if kind in ("auto", "text"):
        try:
            return compare_text(what, before.decode("utf-8"), after.decode("utf-8"), tol)
        except UnicodeDecodeError:
            if kind == "text":
                return Difference(what, "encoding", "text", "bytes that are not UTF-8")
    if before == after:
        return None
    at = next(
        (i for i, (x, y) in enumerate(zip(before, after, strict=False)) if x != y),
        min(len(before), len(after)),
    )
    return Difference(what, f"byte {at}", before[at : at + 8].hex(), after[at : at + 8].hex())


@dataclass(frozen=True)
class Produced:
    """What one run of the program produced: its exit status, standard output and files
    (path -> bytes, None when it did not write one)."""

    returncode: int
    stdout: bytes
    files: Mapping[str, bytes | None]


def kept_lines(stdout: bytes, ignore: Sequence[re.Pattern[str]]) -> bytes:
    """``stdout`` without the lines any of ``ignore`` matches (timings a program prints)."""
    if not ignore:
        return stdout
    lines = stdout.decode("utf-8", errors="replace").splitlines(keepends=True)
    return "".join(ln for ln in lines if not any(p.search(ln) for p in ignore)).encode()


def compare(
    before: Produced,
    after: Produced,
    kinds: Mapping[str, str],
    tol: OutputTolerance,
    ignore: Sequence[re.Pattern[str]] = (),
) -> tuple[Difference, ...]:
    """Every output that differs (empty: the runs agree): exit status, standard output (less the
    lines ``ignore`` matches), each file."""
    found: list[Difference] = []
    if before.returncode != after.returncode:
        found.append(Difference("exit status", "", str(before.returncode), str(after.returncode)))
    out_a, out_b = kept_lines(before.stdout, ignore), kept_lines(after.stdout, ignore)
    if d := compare_output("stdout", out_a, out_b, "auto", tol):
        found.append(d)
    for path in before.files:
        if d := compare_output(path, before.files[path], after.files.get(path), kinds.get(path, "auto"), tol):
            found.append(d)
    return tuple(found)
