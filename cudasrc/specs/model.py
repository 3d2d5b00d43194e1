"""What a spec says: the parsed or inferred values of a kernel's ``// @cuda-agent`` block."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from base.errors import InputError
from sandbox.contract import (
    DistKind,
    Tolerance,
)

MARKER = "@cuda-agent"
Confidence = Literal["high", "medium", "low"]
ArrayRole = Literal["in", "out", "inout"]

# ---------------------------------------------------------------------------------------- values


@dataclass(frozen=True)
class SpecError:
    """A mistake in a spec, at a 0-based line of the file."""

    line: int
    message: str


class InvalidSpec(InputError, ValueError):
    """Raised by :func:`problem` when a spec cannot be resolved for the given sizes/block."""

    def __init__(self, errors: tuple[SpecError, ...]) -> None:
        super().__init__("; ".join(f"line {e.line + 1}: {e.message}" for e in errors))
        self.errors = errors


@dataclass(frozen=True)
class DistSpec:
    """An input distribution with expression arguments (``randint(0, n)``), resolved per size."""

    kind: DistKind = "uniform"
    args: tuple[str, ...] = ()

    def text(self) -> str:
        return f"{self.kind}({', '.join(self.args)})" if self.args else self.kind


@dataclass(frozen=True)
class ArraySpec:
    name: str
    role: ArrayRole
    dtype: str
    count: str
    dist: DistSpec = field(default_factory=DistSpec)
    line: int = -1
    offset: str = "0"  # the kernel's pointer is this many elements into the array


@dataclass(frozen=True)
class CompareSpec:
    """``compare NAME[i < E, ...] where COND`` or ``compare NAME written``: the elements of an
    output that verification compares (the rest are don't-care).  ``index``/``extents``: one
    name and extent per dimension, outermost first (``("i",)``/``()``: the flat element index)."""

    name: str
    index: tuple[str, ...] = ("i",)
    extents: tuple[str, ...] = ()
    where: str = ""
    written: bool = False
    line: int = -1

    def text(self) -> str:
        dims = ", ".join(f"{i} < {e}" for i, e in zip(self.index, self.extents, strict=False))
        head = f"{self.name}[{dims}]" if self.extents else self.name
        return f"{head} written" if self.written else f"{head} where {self.where}"


@dataclass(frozen=True)
class ScalarSpec:
    name: str
    dtype: str
    value: str
    line: int = -1


@dataclass(frozen=True)
class ConstantSpec:
    name: str
    dtype: str
    count: str
    dist: DistSpec = field(default_factory=DistSpec)
    line: int = -1


@dataclass(frozen=True)
class KernelSpec:
    """A kernel's spec as written (expressions unevaluated).  ``lines`` maps a directive
    (``sizes``, ``launch``, ``work``, ``template``, ``tolerance``) to its 0-based line."""

    kernel: str  # qualified kernel name
    sizes: dict[str, str]  # benchmark values, in order
    verify: tuple[dict[str, str], ...] = ()  # overrides of sizes, one dict per verify problem
    grid: tuple[str, ...] = ("cdiv(n, block)",)
    block: tuple[str, ...] = ("256",)
    smem: str = "0"
    args: tuple[ArraySpec | ScalarSpec, ...] = ()
    constants: tuple[ConstantSpec, ...] = ()
    template_args: tuple[str, ...] = ()
    tolerance: Tolerance | None = None  # for every output
    output_tolerances: tuple[Tolerance, ...] = ()  # per output (``arg`` set)
    allow_precision: tuple[str, ...] = ()  # lower precisions a rewrite may use (``precision allow=``)
    bytes: str = ""  # "" -> sum of the arrays' sizes (inout counted twice)
    flops: str = ""
    floor: bool = True  # ``work floor=off``: the counts may overstate the work (no physics floor)
    requires: tuple[tuple[str, int], ...] = ()  # (condition, line): constraints on sizes and launch
    compares: tuple[CompareSpec, ...] = ()  # outputs' cared-for elements
    defines: dict[str, str] = field(default_factory=dict)  # macro -> value per problem (``define``)
    lines: dict[str, int] = field(default_factory=dict)

    @property
    def name_expression(self) -> str:
        """The NVRTC name expression: ``k`` or ``k<float, 256>``."""
        return f"{self.kernel}<{', '.join(self.template_args)}>" if self.template_args else self.kernel


@dataclass(frozen=True)
class Evidence:
    """Where an inferred field comes from.  ``field``: ``size NAME``, ``launch``, ``template``,
    ``arg NAME`` or ``const NAME``; ``where``: ``file:line`` ("" for a guess); ``note``: why it is
    not certain (a loop's first iteration, a default)."""

    field: str
    where: str
    confidence: Confidence
    note: str = ""


@dataclass(frozen=True)
class Inference:
    """A spec proposed from the code, and how sure we are of it (never trusted silently)."""

    spec: KernelSpec
    confidence: Confidence
    reasons: tuple[str, ...]
    evidence: tuple[Evidence, ...] = ()

    def guesses(self) -> dict[str, str]:
        """Field -> note, for every field that is not certain."""
        return {e.field: e.note or "guessed" for e in self.evidence if e.confidence != "high"}


@dataclass(frozen=True)
class SpecResult:
    """What the server and the CLI show for a kernel: the written spec, or an inferred one."""

    kernel: str
    source: Literal["parsed", "inferred"]
    spec: KernelSpec | None
    errors: tuple[SpecError, ...] = ()
    inference: Inference | None = None
