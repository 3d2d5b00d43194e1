"""Cross-check, outside the sandbox, of the built-in engine's histogram speedup (100x in the suite).

    python bench/histogram_check.py --out DIR [--commit SHA]     # on a GPU machine

Builds the rewrite the engine proposes first for ``bench/kernels/histogram.cu`` (a per-block
shared-memory histogram over a grid-stride loop of 8 blocks per SM, 256 threads) with
``engine``, then uses nothing of ``sandbox``: CuPy compiles both kernels, numpy's
``bincount`` is the reference, and each kernel is timed alone with CUDA events (a buffer of twice
the L2 size rewritten before every launch, fresh random data per size). Writes ``histogram_check.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import cupy as cp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.builtin import subject_for  # noqa: E402
from agent.target import target_for  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from engine import Subject, apply_all  # noqa: E402
from engine.histogram import SharedHistogram  # noqa: E402
from engine.mechanical import BlockSize  # noqa: E402

SAMPLES = 50


def kernel(code: str) -> cp.RawKernel:
    return cp.RawModule(code=code, name_expressions=["histogram"]).get_function("histogram")


def timed(
    fn: cp.RawKernel, grid: int, block: int, data: cp.ndarray, hist: cp.ndarray, flush: cp.ndarray
) -> float:
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(SAMPLES):
        flush.fill(1)
        start.record()
        fn((grid,), (block,), (data, hist, np.int32(data.size)))
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return float(np.median(times))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--commit", default="")
    args = parser.parse_args()
    target = target_for(Document.from_file(ROOT / "bench" / "kernels" / "histogram.cu"))
    props = cp.cuda.runtime.getDeviceProperties(0)
    sms = props["multiProcessorCount"]
    rewrite = apply_all(subject_for(target), (SharedHistogram(8 * sms), BlockSize((256,))))
    assert isinstance(rewrite, Subject), rewrite
    naive, private = kernel(target.definition), kernel(rewrite.code)
    flush = cp.empty(2 * props["l2CacheSize"] // 4, dtype=cp.int32)
    rows = []
    for n in (1 << 24, 1_000_003):
        data = cp.asarray(np.random.default_rng(n).integers(0, 256, n, dtype=np.int32))
        expected = np.bincount(cp.asnumpy(data) & 255, minlength=256).astype(np.uint32)
        launches = {"naive": (naive, -(-n // 128), 128), "shared": (private, min(-(-n // 256), 8 * sms), 256)}
        row: dict[str, object] = {"n": n}
        for name, (fn, grid, block) in launches.items():
            hist = cp.zeros(256, dtype=cp.uint32)
            fn((grid,), (block,), (data, hist, np.int32(n)))
            row[f"{name}_correct"] = bool(np.array_equal(cp.asnumpy(hist), expected))
            row[f"{name}_ms"] = timed(fn, grid, block, data, hist, flush)
        row["speedup"] = row["naive_ms"] / row["shared_ms"]  # type: ignore[operator]
        rows.append(row)
        print(row)
    report = {
        "device": props["name"].decode(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": args.commit,
        "command": "python bench/histogram_check.py --out DIR",
        "samples": SAMPLES,
        "rewrite": rewrite.code,
        "rows": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "histogram_check.json").write_text(json.dumps(report, indent=1) + "\n")
    return 0 if all(r["naive_correct"] and r["shared_correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
