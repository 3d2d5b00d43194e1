"""bench/gemm_check.py (the tiled dot product against the naive kernels and cuBLAS on a GPU): which
kernels it measures, its summary, and its run on the simulated GPU and without one."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import gemm_tiles
import pytest

from engine import Subject
from engine.tiled_dot import Tile, TiledDot
from sandbox.contract import CandidateResult, Status, Timing

BENCH = Path(__file__).parent.parent / "bench" / "gemm_check.py"


def gemm_check(*args: str, simulated: bool = True) -> subprocess.CompletedProcess[str]:
    """The script run as a user runs it (on the simulated GPU unless told otherwise)."""
    env = {k: v for k, v in os.environ.items() if k != "CUDA_AGENT_TEST_EXECUTOR"}
    if simulated:
        env["CUDA_AGENT_TEST_EXECUTOR"] = "1"
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_it_measures_every_dot_product_kernel_at_its_gemm_shape() -> None:
    kernels = {k.name: k for k in gemm_tiles.dot_kernels()}
    assert set(kernels) == {"matmul", "matmul_forward", "sgemm_naive", "attention_scores"}
    assert kernels["matmul"].shape == (1, 2048, 2048, 2048)
    assert kernels["matmul_forward"].shape == (1, 2048, 2304, 768)  # inp @ W^T: M=bt, N=oc, K=c
    assert kernels["sgemm_naive"].shape == (1, 2048, 2048, 1024)
    assert kernels["attention_scores"].shape == (96, 1024, 1024, 64)  # one (batch, head) per blockIdx.z
    for k in kernels.values():
        tiles = k.tiles()
        assert tiles[0] == TiledDot().guess(k.match) and sorted(map(str, tiles)) == sorted(
            map(str, TiledDot.space)
        )
        assert isinstance(gemm_tiles.rewrite(k, tiles[0]), Subject)
    assert [k.name for k in gemm_tiles.dot_kernels(names=("sgemm",))] == ["sgemm_naive"]


def _result(ms: float, speedup: float, pct: float, status: Status = Status.OK) -> CandidateResult:
    timing = Timing(ms, ms, ms, ms, 10, 0.0)
    return CandidateResult(
        "c",
        status,
        timing=timing,
        baseline_timing=Timing(ms * speedup, 0, 0, 0, 10, 0.0),
        speedup=speedup,
        pct_peak_flops=pct,
    )


def test_the_summary_keeps_the_fastest_verified_tile_and_checks_the_bar() -> None:
    (k,) = gemm_tiles.dot_kernels(names=("matmul",))
    guess, other, third = k.tiles()[:3]
    rows = [
        gemm_tiles.tile_record(k, guess, _result(0.5, 12.0, 40.0), cublas_ms=0.4),
        gemm_tiles.tile_record(k, other, _result(0.3, 20.0, 66.0, Status.MISMATCH), cublas_ms=0.4),
        gemm_tiles.tile_record(k, third, _result(0.45, 13.3, 44.0), cublas_ms=0.4),
    ]
    assert rows[0]["guess"] and not rows[2]["guess"]
    assert rows[0]["pct_cublas"] == 80.0 and rows[0]["naive_ms"] == 6.0
    best = gemm_tiles.summary(k, rows, {"tflops": 50.0})
    assert best["best"] == str(third) and not best["best_is_guess"]  # the mismatching tile does not count
    assert best["meets_bar"] and best["speedup"] == 13.3
    slow = gemm_tiles.summary(
        k, [gemm_tiles.tile_record(k, guess, _result(0.5, 9.0, 40.0), cublas_ms=0.4)], {}
    )
    assert not slow["meets_bar"]
    assert gemm_tiles.summary(k, [], {})["best"] is None


def test_it_runs_on_the_simulated_gpu_and_writes_a_line_per_measurement(tmp_path: Path) -> None:
    done = gemm_check("--out", str(tmp_path), "--deadline", "120", "--kernels", "sgemm")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(x) for x in (tmp_path / "gemm_check.jsonl").read_text().splitlines()]
    assert [json.loads(x) for x in done.stdout.splitlines()] == lines  # printed as written
    kinds = [x["kind"] for x in lines]
    assert kinds == ["device", "cublas", *["tile"] * len(TiledDot.space), "summary", "done"]
    assert lines[1]["skipped"] == "the simulated GPU has no cuBLAS"  # CuPy is never touched
    tiles = [x for x in lines if x["kind"] == "tile"]
    assert all(t["status"] == "ok" and t["ms"] > 0 for t in tiles)
    assert tiles[0]["guess"] and tiles[0]["tile"] == str(Tile(128, 128, 8, 8, 8))


def test_it_stops_at_its_deadline(tmp_path: Path) -> None:
    assert gemm_check("--out", str(tmp_path), "--deadline", "1").returncode == 0
    lines = [json.loads(x) for x in (tmp_path / "gemm_check.jsonl").read_text().splitlines()]
    tiles = 4 * len(TiledDot.space)
    assert [x["kind"] for x in lines] == [
        "device",
        *["cublas"] * 4,
        *["tile"] * tiles,
        *["summary"] * 4,
        "done",
    ]
    assert all(x.get("skipped") == "deadline" for x in lines if x["kind"] in ("cublas", "tile"))
    assert all(x["best"] is None and not x["meets_bar"] for x in lines if x["kind"] == "summary")


def test_without_a_gpu_it_says_so_in_one_line(tmp_path: Path) -> None:
    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: the no-GPU path is not reached")
    done = gemm_check("--out", str(tmp_path), simulated=False)
    err = done.stderr.strip()
    assert done.returncode == 2 and err.startswith("gemm_check: needs CuPy and a GPU") and "\n" not in err
    done = gemm_check("--out", str(tmp_path), "--kernels", "softmax", simulated=False)
    assert done.returncode == 2 and "matches the tiled dot product among softmax" in done.stderr
