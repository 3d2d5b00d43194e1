"""What the host program's values are: numbers as spec expressions over roots, buffers, launches."""

from __future__ import annotations

from dataclasses import dataclass, field

from sandbox.expr import number, operand


@dataclass(frozen=True)
class Num:
    """A number: a spec expression over roots.  ``sized``: the value is ``count * elem_bytes``
    (a byte count built with ``sizeof``), so a buffer's element count can be read back."""

    expr: str
    sized: tuple[str, int] | None = None
    is_float: bool = False


@dataclass(frozen=True)
class Dims:
    dims: tuple[Num | None, ...]  # None: unknown


@dataclass(frozen=True)
class Buffer:
    """Memory behind a pointer: ``count`` elements of ``elem`` bytes (a byte count when ``elem`` is
    1), ``offset`` elements in; ``where`` is the allocation's file:line."""

    count: str
    elem: int
    where: str
    offset: str = "0"
    fill: str = ""  # "0" once cudaMemset to zero
    dist: tuple[str, float, float] | None = None  # what the host drew its elements from (kind, low, high)


@dataclass(frozen=True)
class Items:
    """An array initialiser ``{a, b, c}``."""

    items: tuple[Value, ...]


@dataclass(frozen=True)
class FuncRef:
    """A kernel named as a value: ``auto k = kernel;``, ``&kernel``, ``kernel<float, 128>``."""

    name: str
    template_args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Tensor:
    """A PyTorch tensor handed to an extension's launcher: its sizes (None: unknown)."""

    dims: tuple[Num | None, ...]

    def numel(self) -> Num | None:
        if not self.dims or any(d is None for d in self.dims):
            return None
        return Num("*".join(operand(d.expr) for d in self.dims if d is not None))


@dataclass(frozen=True)
class CommandLine:
    """``argv`` of ``main``: the arguments the program was run with (the program's name left out)."""

    args: tuple[str, ...]


@dataclass(frozen=True, eq=False)
class Ref:
    """``&x`` of a variable: the callee's ``*p = v`` stores into the caller's ``x``."""

    scope: dict[str, Value]
    name: str


@dataclass(frozen=True)
class Record:
    """A struct the runtime fills (``cudaGetDeviceProperties``): its known fields."""

    fields: tuple[tuple[str, Num], ...]


@dataclass(frozen=True)
class Draws:
    """A ``<random>`` distribution object (``std::uniform_real_distribution<float> d(lo, hi)``):
    calling it draws from ``low``..``high`` (``integral``: ``high`` included)."""

    low: float
    high: float
    integral: bool


Value = Num | Dims | Buffer | Items | FuncRef | Tensor | CommandLine | Ref | Record | Draws | None


@dataclass(frozen=True)
class Root:
    name: str  # unique in the run
    value: str  # the constant expression it was initialised with
    where: str  # file:line
    symbol: str = ""  # the file-scope name it stands for (a macro, a global constant): compiled into kernels


@dataclass(frozen=True)
class LaunchEvent:
    kernel: str
    template_args: tuple[str, ...]
    grid: Value
    block: Value
    smem: Value
    args: tuple[Value, ...]
    where: str
    notes: tuple[str, ...] = ()  # loops taken once, branches taken both ways, ...
    defines: tuple[tuple[str, Num], ...] = ()  # macros the launcher compiles the kernel with


@dataclass(frozen=True)
class SymbolCopy:
    """``cudaMemcpyToSymbol(symbol, src, bytes)``; ``dist``: what ``src``'s elements were drawn from."""

    symbol: str
    bytes: Num | None
    where: str
    dist: tuple[str, float, float] | None = None


@dataclass
class HostRun:
    """What running the program found: every launch (first one per kernel), roots, symbol copies."""

    launches: dict[str, LaunchEvent] = field(default_factory=dict)
    roots: dict[str, Root] = field(default_factory=dict)
    copies: dict[str, SymbolCopy] = field(default_factory=dict)
    constants: dict[str, tuple[str, str]] = field(default_factory=dict)  # __constant__ name -> (type, count)
    requires: dict[str, str] = field(default_factory=dict)  # condition over roots -> file:line
    command: str = ""  # the command line main() was run with, as shown, and where it was read
    entries: dict[str, str] = field(
        default_factory=dict
    )  # kernel -> the function the run entered to reach it

    def env(self) -> dict[str, int | float]:
        """Root values, for evaluating expressions."""
        out: dict[str, int | float] = {}
        for r in self.roots.values():
            try:
                out[r.name] = number(r.value, out, finite=False)
            except ValueError:
                continue
        return out
