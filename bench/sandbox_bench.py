"""Sandbox benchmark: device ceilings, timing repeatability, candidates per second.

    python bench/sandbox_bench.py --out bench/results      # on a GPU machine

Writes ``sandbox.json`` and ``sandbox.md`` (device, date, command, git commit) to ``--out``.

- ceilings: device-to-device copy GB/s and FP32 GEMM GFLOP/s, measured afresh (not from cache);
- repeatability: the same kernel against itself, ``--runs`` separate evaluations; the speedup
  ratio should be 1.00 with a small spread;
- throughput: ``--candidates`` distinct small candidates (each compiled by NVRTC, verified on 3
  problem sizes x 3 seeds, timed interleaved with the baseline) through one LocalExecutor.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from sandbox_fakes import kernel_file, vadd_request  # noqa: E402

from sandbox.contract import Budget, Candidate, KernelSource, Status, to_dict  # noqa: E402
from sandbox.local import LocalExecutor  # noqa: E402

VADD = ROOT / "tests" / "data" / "sandbox" / "vadd.cu"
SEARCH_BUDGET = Budget(timeout_s=30.0, time_budget_ms=40.0, min_samples=10, max_samples=100)


def git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get("GIT_COMMIT", "unknown")


def repeatability(ex: LocalExecutor, runs: int, n: int) -> dict[str, object]:
    base = kernel_file(VADD, "vadd")
    ratios, medians = [], []
    for r in range(runs):
        req = vadd_request(base, (Candidate("self", base),), bench=n, request_id=f"repeat-{r}")
        res = ex.evaluate(req).candidates[0]
        if res.status != Status.OK or res.timing is None:
            raise RuntimeError(f"self-comparison failed: {res.status} {res.message}")
        ratios.append(res.speedup)
        medians.append(res.timing.median_ms)
    return {
        "kernel": "vadd (block 256) vs itself",
        "n": n,
        "runs": runs,
        "ratios": ratios,
        "ratio_mean": statistics.fmean(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "ratio_stdev": statistics.stdev(ratios) if runs > 1 else 0.0,
        "candidate_median_ms": medians,
    }


def throughput(ex: LocalExecutor, count: int, n: int, budget: Budget) -> dict[str, object]:
    base = kernel_file(VADD, "vadd")
    # distinct sources, so every candidate is really compiled (no cache hits)
    cands = tuple(
        Candidate(f"v{i}", KernelSource(f"// variant {i}\n{base.source}", "vadd", filename="vadd.cu"))
        for i in range(count)
    )
    req = replace(vadd_request(base, cands, sizes=(1, 4097), bench=n, request_id="throughput"), budget=budget)
    start = time.perf_counter()
    result = ex.evaluate(req)
    seconds = time.perf_counter() - start
    statuses = [c.status.value for c in result.candidates]
    samples = [c.timing.samples for c in result.candidates if c.timing]
    return {
        "candidates": count,
        "bench_n": n,
        "verify": "n=1, n=4097 and the bench size, 3 seeds each",
        "budget": to_dict(budget),
        "seconds": seconds,
        "candidates_per_second": count / seconds,
        "all_ok": all(s == "ok" for s in statuses),
        "median_samples": statistics.median(samples) if samples else 0,
        "median_seconds_per_candidate": statistics.median(c.seconds for c in result.candidates),
    }


def markdown(report: dict) -> str:  # type: ignore[type-arg]
    dev, rep, thr = report["device"], report["repeatability"], report["throughput"]
    return "\n".join(
        [
            "# Sandbox benchmark",
            "",
            f"- device: {dev['name']} (cc {dev['compute_capability']}, {dev['sm_count']} SMs, "
            f"L2 {dev['l2_bytes'] >> 20} MiB, driver {dev['driver']})",
            f"- date: {report['date']}",
            f"- command: `{report['command']}`",
            f"- commit: {report['commit']}",
            f"- sandbox: {'bubblewrap, no network' if report['bwrap'] else 'plain subprocess (no bwrap)'}",
            "",
            "## Device ceilings (measured once per device, cached)",
            "",
            f"- device-to-device copy: {dev['peak_bandwidth_gbps']:.0f} GB/s (bytes read + written)",
            f"- FP32 GEMM (cuBLAS via CuPy, 8192^3): {dev['peak_gflops']:.0f} GFLOP/s",
            "",
            "## Timing repeatability: the same kernel against itself",
            "",
            f"{rep['runs']} separate evaluations of {rep['kernel']}, n = {rep['n']}:",
            f"speedup ratio mean {rep['ratio_mean']:.4f}, min {rep['ratio_min']:.4f}, "
            f"max {rep['ratio_max']:.4f}, stdev {rep['ratio_stdev']:.4f}.",
            "",
            "## Candidates per second (one GPU)",
            "",
            f"{thr['candidates']} distinct candidates (NVRTC compile + verify on 3 sizes x 3 seeds + "
            f"interleaved timing, bench n = {thr['bench_n']}, time budget "
            f"{thr['budget']['time_budget_ms']:.0f} ms): {thr['seconds']:.2f} s, "
            f"**{thr['candidates_per_second']:.1f} candidates/s**, all ok: {thr['all_ok']}, "
            f"median {thr['median_samples']} samples per kernel.",
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--repeat-n", type=int, default=1 << 22)
    parser.add_argument("--candidates", type=int, default=30)
    parser.add_argument("--small-n", type=int, default=1 << 16)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp()  # measure the ceilings afresh
    with LocalExecutor() as ex:
        info = ex.device_info()
        report = {
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "command": shlex.join([Path(sys.executable).name, *sys.argv]),
            "commit": git_commit(),
            "bwrap": ex.sandboxed,
            "device": to_dict(info),
            "repeatability": repeatability(ex, args.runs, args.repeat_n),
            "throughput": throughput(ex, args.candidates, args.small_n, SEARCH_BUDGET),
        }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sandbox.json").write_text(json.dumps(report, indent=2))
    (args.out / "sandbox.md").write_text(markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
