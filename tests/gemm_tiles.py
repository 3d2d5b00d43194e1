"""The dot-product kernels of ``bench/kernels/`` that the tiled dot product (``TiledDot``) matches,
with their GEMM shapes and tiles, and the lines ``bench/gemm_check.py`` writes for them: one per
tile measured, one summary per kernel against the issue's bar."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.builtin import subject_for
from agent.target import Target, target_for
from cudasrc.source import Document
from engine import NotApplicable, Subject, safe_apply
from engine.passes import Apply
from engine.tiled_dot import DotMatch, Tile, TiledDot
from sandbox.contract import CandidateResult, Status

KERNELS = Path(__file__).resolve().parents[1] / "bench" / "kernels"
SPEEDUP_BAR = 10.0  # the bar for the fp32 matmul-style kernels
GEMM_RATE_BAR = 35.0  # % of the measured FP32 GEMM rate


@dataclass(frozen=True)
class DotKernel:
    """A kernel the pass matches, with its GEMM shape at the benchmark size."""

    file: str
    target: Target
    match: DotMatch

    @property
    def name(self) -> str:
        return self.target.kernel

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(batch, M, N, K) at the benchmark size."""
        m, n, z, k = self.match.sizes
        return z, m, n, k

    def tiles(self) -> list[Tile]:
        """The pass's parameter space, its guess for this kernel first."""
        dot = TiledDot()
        first = dot.guess(self.match)
        return [first, *(t for t in dot.space if t != first and isinstance(t, Tile))]


def dot_kernels(folder: Path = KERNELS, names: tuple[str, ...] = ()) -> list[DotKernel]:
    """The kernels of ``folder`` (every one, or those named) that the tiled dot product matches."""
    out = []
    for path in sorted(folder.glob("*.cu")):
        doc = Document.from_file(path)
        for k in doc.kernels:
            if names and k.name not in names and path.stem not in names:
                continue
            try:
                target = target_for(doc, k.name)
            except ValueError:
                continue
            found = TiledDot().match(subject_for(target).view)
            if not isinstance(found, NotApplicable):
                out.append(DotKernel(path.name, target, found))
    return out


def rewrite(kernel: DotKernel, tile: Tile) -> Subject | NotApplicable:
    return safe_apply(Apply(TiledDot(), tile), subject_for(kernel.target))


def tile_record(kernel: DotKernel, tile: Tile, result: CandidateResult, cublas_ms: float) -> dict[str, Any]:
    """One tile's line: the sandbox's verdict and numbers, and its share of cuBLAS's speed."""
    ms = result.timing.median_ms if result.timing else 0.0
    base = result.baseline_timing.median_ms if result.baseline_timing else 0.0
    res = result.resources
    return {
        "kind": "tile",
        "kernel": kernel.name,
        "tile": str(tile),
        "guess": tile == kernel.tiles()[0],
        "status": result.status.value,
        "message": result.message[:300],
        "ms": round(ms, 5),
        "naive_ms": round(base, 5),
        "speedup": round(result.speedup, 3),
        "speedup_low": round(result.speedup_low, 3),
        "speedup_high": round(result.speedup_high, 3),
        "tflops": round(result.achieved_gflops / 1e3, 3),
        "pct_gemm_rate": round(result.pct_peak_flops, 2),
        "pct_cublas": round(100.0 * cublas_ms / ms, 2) if ms > 0 and cublas_ms > 0 else None,
        "registers": res.registers if res else None,
        "spills": (res.spill_stores + res.spill_loads) if res else None,
    }


def summary(kernel: DotKernel, tiles: list[dict[str, Any]], cublas: dict[str, Any]) -> dict[str, Any]:
    """The best verified tile of a kernel and whether it meets the issue's bar."""
    ok = [t for t in tiles if t["status"] == Status.OK.value and t["ms"] > 0]
    best = min(ok, key=lambda t: t["ms"]) if ok else None
    return {
        "kind": "summary",
        "kernel": kernel.name,
        "shape": kernel.shape,
        "guess": str(kernel.tiles()[0]),
        "best": best["tile"] if best else None,
        "best_is_guess": bool(best and best["guess"]),
        "speedup": best["speedup"] if best else 0.0,
        "pct_gemm_rate": best["pct_gemm_rate"] if best else 0.0,
        "pct_cublas": best["pct_cublas"] if best else None,
        "cublas_tflops": cublas.get("tflops"),
        "meets_bar": bool(best and best["speedup"] >= SPEEDUP_BAR and best["pct_gemm_rate"] >= GEMM_RATE_BAR),
        "tiles_measured": len(tiles),
    }
