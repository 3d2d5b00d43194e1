"""The structural passes the built-in search tries (:mod:`agent.builtin`), in the order it tries them.

Adding a pass: write it in one file of this package (a :class:`~agent.transforms.passes.Pass`
subclass: ``match``, ``rewrite``, ``space``; ``space_for(device)`` to widen it for the device) and
add one instance here; tests/data/variants/<family>/ holds the spellings it must match
(tests/test_variants.py reads the folder).  Write its matcher as a pattern where the code has a
shape (:mod:`agent.transforms.patterns`).  A pass composes with the others with no more work: the
search tries it after any pass whose result it matches (:mod:`agent.transforms.compose`), so a
pass does one rewrite and leaves the next to the pass that owns it.
"""

from __future__ import annotations

from typing import Any

from agent.transforms.block_scan import BlockScan
from agent.transforms.column_reduction import ColumnReduction
from agent.transforms.elementwise import GridStride, Vectorize
from agent.transforms.flat_permute import FlatPermute
from agent.transforms.histogram import SharedHistogram
from agent.transforms.launch_fill import LaunchFill
from agent.transforms.passes import Apply, Pass
from agent.transforms.permute import TiledPermute
from agent.transforms.row_parallel import RowParallel, StridedRowVectors
from agent.transforms.same_layout import SameLayoutReduction
from agent.transforms.stencil import StencilTile
from agent.transforms.tiled_dot import TiledDot
from agent.transforms.tiled_transpose import TiledTranspose
from agent.transforms.warp_reduction import WarpReduction
from agent.transforms.whole_grid import WholeGridPacks
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
    FlatPermute(),
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
