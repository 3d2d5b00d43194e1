"""The structural passes the built-in search tries (:mod:`agent.builtin`), in the order it tries them.

Adding a pass: write it in one file of this package (a :class:`~agent.transforms.passes.Pass`
subclass: ``match``, ``rewrite``, ``space``) and add one instance here.
"""

from __future__ import annotations

from typing import Any

from agent.transforms.block_scan import BlockScan
from agent.transforms.column_reduction import ColumnReduction
from agent.transforms.launch_fill import LaunchFill
from agent.transforms.passes import Apply, Pass
from agent.transforms.permute import TiledPermute
from agent.transforms.row_parallel import RowParallel, StridedRowVectors
from agent.transforms.same_layout import SameLayoutReduction
from agent.transforms.stencil import StencilTile
from agent.transforms.tiled_dot import TiledDot
from agent.transforms.tiled_transpose import TiledTranspose
from agent.transforms.whole_grid import WholeGridPacks

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
)


def candidates() -> tuple[Apply, ...]:
    """Every (pass, parameter value) the search may try, each pass's values best first."""
    return tuple(Apply(p, params) for p in PASSES for params in p.space)
