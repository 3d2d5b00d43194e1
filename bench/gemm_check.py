"""The tiled dot product against the naive kernels and cuBLAS on a GPU (issue 13, pass 2).

    PYTHONPATH=. python3 bench/gemm_check.py --out DIR [--deadline 200] [--kernels matmul,sgemm]

For each kernel of ``bench/kernels/`` that the ``TiledDot`` pass matches (the fp32 dot-product
kernels: ``matmul``, ``matmul_bias``, ``sgemm``, ``attention_scores``):

1. ``cublas``: the same GEMM shape (batch x M x N x K at the spec's benchmark size) through
   ``cupy.matmul`` in FP32 (TF32 off), timed alone with CUDA events, a buffer of twice the L2
   rewritten before every call, median of the samples;
2. ``tile``: the rewrite at each point of the pass's parameter space (its guess first) evaluated by
   the sandbox against the naive original, one request per tile: verification at the spec's
   verify sizes (odd ones: the edge paths), then paired timing at the benchmark size.  Each line
   has the tile's ms, the naive kernel's ms, the speedup with its quartiles, TFLOP/s (the spec's
   ``work flops``), % of the device's measured FP32 GEMM rate, % of cuBLAS (cuBLAS's time over
   the tile's on the same shape) and registers;
3. ``summary``: the best verified tile and whether it meets the issue's bar (>= 10x over the naive
   kernel and >= 35% of the measured FP32 GEMM rate).

cuBLAS goes first for every kernel, then each kernel's guessed tile, then the other tiles, so a
short deadline still measures every kernel's guess.

One JSON line per measurement goes to ``DIR/gemm_check.jsonl`` as it is made (and to stdout); the
run stops itself before ``--deadline`` seconds, recording what it skipped.  Without CuPy or a GPU
it says so in one line and exits 2.  ``CUDA_AGENT_TEST_EXECUTOR=1`` runs it on the simulated GPU
(a smoke test of this script: its numbers mean nothing, cuBLAS is skipped without CuPy).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.builtin import subject_for  # noqa: E402
from agent.proposal import Proposal  # noqa: E402
from agent.source import Document  # noqa: E402
from agent.target import Target, target_for  # noqa: E402
from agent.transforms import NotApplicable, Subject, safe_apply  # noqa: E402
from agent.transforms.passes import Apply  # noqa: E402
from agent.transforms.tiled_dot import DotMatch, Tile, TiledDot  # noqa: E402
from sandbox.contract import Budget, CandidateResult, Status  # noqa: E402
from sandbox.executor import Executor, ExecutorError  # noqa: E402

KERNELS = ROOT / "bench" / "kernels"
SPEEDUP_BAR = 10.0  # the bar for the fp32 matmul-style kernels
GEMM_RATE_BAR = 35.0  # % of the measured FP32 GEMM rate
RESERVE_S = 20.0  # a tile's request is not started with less time than this left
SAMPLES = 30


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


class Log:
    def __init__(self, out: Path, deadline_s: float) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "gemm_check.jsonl"
        self.start = time.monotonic()
        self.deadline = self.start + deadline_s

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def write(self, record: dict[str, Any]) -> None:
        record["t_s"] = round(time.monotonic() - self.start, 2)
        line = json.dumps(record, default=str)
        with self.path.open("a") as f:
            f.write(line + "\n")
        print(line, flush=True)


def cublas(shape: tuple[int, int, int, int], l2_bytes: int) -> dict[str, Any]:
    """FP32 cupy.matmul (cuBLAS, TF32 off) on ``shape``: median ms and TFLOP/s over SAMPLES calls,
    each after rewriting a buffer of twice the L2."""
    os.environ["CUPY_TF32"] = "0"
    import cupy as cp

    batch, m, n, k = shape
    rng = cp.random.default_rng(0)
    a = rng.standard_normal((batch, m, k), dtype=cp.float32)
    b = rng.standard_normal((batch, k, n), dtype=cp.float32)
    flush = cp.empty(max(2 * l2_bytes, 1 << 20) // 4, dtype=cp.float32)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    cp.matmul(a, b)  # warm-up: handle and workspace
    times = []
    for _ in range(SAMPLES):
        flush.fill(1)
        start.record()
        cp.matmul(a, b)
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    times.sort()
    ms = times[len(times) // 2]
    return {
        "ms": round(ms, 5),
        "q1_ms": round(times[len(times) // 4], 5),
        "q3_ms": round(times[3 * len(times) // 4], 5),
        "tflops": round(2 * batch * m * n * k / (ms * 1e-3) / 1e12, 3),
    }


def measure(
    executor: Executor, kernel: DotKernel, tile: Tile, cublas_ms: float, log: Log
) -> dict[str, Any] | None:
    """One tile of one kernel through the sandbox: its line (None when it could not run)."""
    head = {"kind": "tile", "kernel": kernel.name, "tile": str(tile)}
    out = rewrite(kernel, tile)
    if isinstance(out, NotApplicable):
        log.write({**head, "status": "not_applicable", "message": out.reason})
        return None
    proposal = Proposal(code=out.code, description=str(tile), launch=out.launch)
    cid = f"tile-{tile.bm}x{tile.bn}x{tile.bk}{'' if tile.staged else '-direct'}"
    candidate, why = kernel.target.candidate(cid, proposal)
    if candidate is None:
        log.write({**head, "status": "launch_error", "message": why})
        return None
    budget = Budget(timeout_s=max(10.0, min(60.0, log.left() - 5)))
    request = kernel.target.request(f"gemm-{kernel.name}-{cid}", (candidate,), seeds=(1, 2), budget=budget)
    result = executor.evaluate(request)
    if result.baseline.status is not Status.OK:
        log.write({**head, "status": "baseline_failed", "message": result.baseline.message[:300]})
        return None
    record = tile_record(kernel, tile, result.candidates[0], cublas_ms)
    log.write(record)
    return record


def run(executor: Executor, kernels: list[DotKernel], log: Log) -> None:
    """cuBLAS on every kernel's shape, then every kernel's guessed tile, then the other tiles
    (so a short deadline still measures each kernel's guess), then one summary per kernel."""
    device = executor.device_info()
    bases: dict[str, dict[str, Any]] = {}
    for kernel in kernels:
        if log.left() < RESERVE_S:
            bases[kernel.name] = {"skipped": "deadline"}
        elif device.simulated:
            bases[kernel.name] = {"skipped": "the simulated GPU has no cuBLAS"}
        else:
            try:
                bases[kernel.name] = cublas(kernel.shape, device.l2_bytes)
            except ImportError as e:
                bases[kernel.name] = {"skipped": f"no CuPy ({e})"}
        log.write({"kind": "cublas", "kernel": kernel.name, "shape": kernel.shape, **bases[kernel.name]})
    order = [(k, k.tiles()[0]) for k in kernels] + [(k, t) for k in kernels for t in k.tiles()[1:]]
    records: dict[str, list[dict[str, Any]]] = {k.name: [] for k in kernels}
    for kernel, tile in order:
        if log.left() < RESERVE_S:
            log.write({"kind": "tile", "kernel": kernel.name, "tile": str(tile), "skipped": "deadline"})
            continue
        record = measure(executor, kernel, tile, float(bases[kernel.name].get("ms") or 0.0), log)
        if record is not None:
            records[kernel.name].append(record)
    for kernel in kernels:
        log.write(summary(kernel, records[kernel.name], bases[kernel.name]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--deadline", type=float, default=200.0, help="seconds for the whole run")
    parser.add_argument("--kernels", default="", help="comma-separated kernel or file names (default: all)")
    args = parser.parse_args(argv)
    log = Log(args.out, args.deadline)
    names = tuple(n for n in args.kernels.split(",") if n)
    kernels = dot_kernels(KERNELS, names)
    if not kernels:
        print(
            f"gemm_check: no kernel of {KERNELS} matches the tiled dot product{' among ' + args.kernels if names else ''}",
            file=sys.stderr,
        )
        return 2
    simulated = os.environ.get("CUDA_AGENT_TEST_EXECUTOR") == "1"
    if not simulated:
        try:
            import cupy  # noqa: F401
        except ImportError as e:
            print(f"gemm_check: needs CuPy and a GPU: {e}", file=sys.stderr)
            return 2
    from server.cli.common import open_executor

    try:
        with open_executor(0) as executor:
            device = executor.device_info()
            log.write(
                {
                    "kind": "device",
                    "name": device.name,
                    "sm_count": device.sm_count,
                    "fp32_gemm_gflops": device.peak_gflops,
                    "copy_gbps": device.peak_bandwidth_gbps,
                    "commit": _commit(),
                }
            )
            run(executor, kernels, log)
    except ExecutorError as e:
        print(f"gemm_check: no GPU to evaluate on: {e}", file=sys.stderr)
        return 2
    log.write({"kind": "done", "seconds_left": round(log.left(), 1)})
    return 0


def _commit() -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
