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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the packages; the kernels' tiles (tests/gemm_tiles.py)

from gemm_tiles import KERNELS, DotKernel, dot_kernels, rewrite, summary, tile_record  # noqa: E402

from agent.proposal import Proposal  # noqa: E402
from engine import NotApplicable  # noqa: E402
from engine.tiled_dot import Tile  # noqa: E402
from sandbox.contract import Budget, Status  # noqa: E402
from sandbox.executor import Executor, ExecutorError  # noqa: E402

RESERVE_S = 20.0  # a tile's request is not started with less time than this left
SAMPLES = 30


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
