"""The structural passes the built-in search tries (:mod:`agent.builtin`), in the order it tries them.

Adding a pass: write it in one file of this package (a :class:`~engine.passes.Pass`
subclass: ``match``, ``rewrite``, ``space``; ``space_for(device)`` to widen it for the device) and
add one instance here; tests/data/variants/<family>/ holds the spellings it must match
(tests/test_variants.py reads the folder).  Write its matcher as a pattern where the code has a
shape (:mod:`engine.patterns`).  A pass composes with the others with no more work: the
search tries it after any pass whose result it matches (:mod:`engine.compose`), so a
pass does one rewrite and leaves the next to the pass that owns it.
"""

from __future__ import annotations

from typing import Any

from engine.block_scan import BlockScan
from engine.column_reduction import ColumnReduction
from engine.elementwise import GridStride, Vectorize
from engine.histogram import SharedHistogram
from engine.launch_fill import LaunchFill
from engine.passes import Apply, Pass
from engine.permute import TiledPermute
from engine.row_parallel import RowParallel, StridedRowVectors
from engine.same_layout import SameLayoutReduction
from engine.stencil import StencilTile
from engine.tiled_dot import TiledDot
from engine.tiled_transpose import TiledTranspose
from engine.warp_reduction import WarpReduction
from engine.whole_grid import WholeGridPacks
from sandbox.contract import DeviceInfo

PASSES: tuple[Pass[Any], ...] = (
    TiledDot(),
    RowParallel(),
    StridedRowVectors(),
    SameLayoutReduction(),
    TiledTranspose(),
    StencilTile(),
    ColumnReduction(),
    LaunchFill(),
    WholeGridPacks(),
    BlockScan(),
    TiledPermute(),
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
