"""The structural passes the built-in search tries (:mod:`agent.builtin`), in the order it tries them.

Adding a pass: write it in one file of this package (a :class:`~engine.passes.Pass`
subclass: ``match``, ``rewrite``, ``space``; ``space_for(device)`` to widen it for the device),
importing no other pass (shared facts live in the view, :mod:`engine.maps` and
:mod:`engine.guards`), add one instance here, and name it in the ``passes.txt`` of its
family's corpus folder, ``bench/corpus/<family>/`` (real kernels it is judged on);
:func:`unbacked` lists the passes no corpus folder names, and the registry's test refuses them.
Until the corpus holds a family, its folder of our own spellings stands in for it:
``tests/data/variants/<family>/passes.txt`` or ``tests/data/passes/<module>/``.  Write its matcher as a pattern where the code has a
shape (:mod:`engine.patterns`).  A pass composes with the others with no more work: the
search tries it after any pass whose result it matches (:mod:`engine.compose`), so a
pass does one rewrite and leaves the next to the pass that owns it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.block_scan import BlockScan
from engine.column_reduction import ColumnReduction
from engine.elementwise import GridStride, Vectorize
from engine.flat_permute import FlatPermute
from engine.histogram import SharedHistogram
from engine.launch_fill import LaunchFill
from engine.looped_transpose import LoopedTranspose
from engine.passes import Apply, Pass
from engine.permute import TiledPermute
from engine.row_parallel import RowParallel, StridedRowVectors
from engine.same_layout import SameLayoutReduction
from engine.shared_pad import SharedPad
from engine.stencil import StencilTile
from engine.tiled_dot import TiledDot
from engine.tiled_transpose import TiledTranspose
from engine.warp_atomic import WarpAtomic
from engine.warp_reduction import WarpReduction
from engine.whole_grid import WholeGridPacks
from sandbox.contract import DeviceInfo

PASSES: tuple[Pass[Any], ...] = (
    TiledDot(),
    RowParallel(),
    StridedRowVectors(),
    SameLayoutReduction(),
    WarpAtomic(),
    TiledTranspose(),
    StencilTile(),
    ColumnReduction(),
    LaunchFill(),
    WholeGridPacks(),
    BlockScan(),
    SharedPad(),
    TiledPermute(),
    FlatPermute(),
    LoopedTranspose(),
    # rewrites that are no family's first guess alone (``leads`` False): the fallbacks of the
    # composite guess, and every arm value of the search
    Vectorize(),
    WarpReduction(),
    GridStride(),
    SharedHistogram(),
)


def candidates(device: DeviceInfo | None = None) -> tuple[Apply, ...]:
    """Every (pass, parameter value) the search may try on ``device``, each pass's values best first."""
    return tuple(Apply(p, params) for p in PASSES for params in p.space_for(device))


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def unbacked(root: Path, passes: tuple[Pass[Any], ...] = PASSES) -> tuple[str, ...]:
    """The names of ``passes`` that no corpus folder under the checkout ``root`` names: neither a
    ``bench/corpus/<family>/passes.txt`` nor, standing in for a family the corpus lacks yet,
    ``tests/data/variants/<family>/passes.txt`` or a folder ``tests/data/passes/<module>/``."""
    named: set[str] = set()
    for listing in (*root.glob("bench/corpus/*/passes.txt"), *root.glob("tests/data/variants/*/passes.txt")):
        lines = listing.read_text(encoding="utf-8").splitlines()
        named |= {_key(line.strip()) for line in lines if line.strip() and not line.startswith("#")}
    folders = {p.name for p in (root / "tests" / "data" / "passes").glob("*") if p.is_dir()}
    return tuple(
        p.name
        for p in passes
        if _key(p.name) not in named and type(p).__module__.rsplit(".", 1)[-1] not in folders
    )
