"""GPU check of the vectorized narrow-type rewrites and the tiled transpose, as % of copy bandwidth.

    python3 bench/vec_check.py --out DIR [--deadline 120]      # from the repo root, on a GPU machine

For ``bench/kernels/gelu_bf16.cu``, ``residual_bf16.cu``, ``transpose_1d.cu`` and ``gelu.cu``
(fp32, for comparison), the rewrites of :mod:`engine` (vector widths and coarsening,
with and without fast math; the tiled transpose's searched tile shapes) and, for the bf16 kernels,
a hand-written expert version (8 bf16 per 16-byte load, ``__nv_bfloat162`` pairs converted with
``__bfloat1622float2``/``__floats2bfloat162_rn``) are evaluated by the sandbox exactly as the
optimizer does (verification at the spec's sizes, interleaved timing with L2 flushed, % of the
device's measured copy ceiling: the suite's ``pct_peak_after``).  Side by side, a CuPy
device-to-device copy of the same bytes (half the bytes the kernel moves, read + written) is timed
with CUDA events, L2 flushed before each sample, so ``pct_of_same_copy`` says how close each kernel
gets to a copy of its own size.

Writes ``DIR/vec_check.jsonl``, one JSON object per line as it goes (``copy`` lines, then one line
per candidate with ``kernel``, ``label``, ``status``, ``median_ms``, ``gbps``, ``pct_peak`` (the
sandbox's), ``pct_of_same_copy``, ``speedup``), and stops starting new kernels after ``--deadline``
seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.builtin import subject_for  # noqa: E402
from agent.proposal import Proposal  # noqa: E402
from agent.target import Target, target_for  # noqa: E402
from cudasrc.launch import LaunchChange  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from engine import NotApplicable, Transform, apply_all  # noqa: E402
from engine.elementwise import Vectorize  # noqa: E402
from engine.mechanical import BlockSize, FastMath, RestrictConst  # noqa: E402
from engine.passes import Apply  # noqa: E402
from engine.tiled_transpose import TiledTranspose  # noqa: E402
from sandbox.contract import Budget  # noqa: E402
from sandbox.local import LocalExecutor  # noqa: E402

KERNELS = ROOT / "bench" / "kernels"
VECTORS: dict[str, tuple[Transform, ...]] = {
    "vec16": (Vectorize(16, 1),),
    "vec16 x2": (Vectorize(16, 2),),
    "vec16 x4": (Vectorize(16, 4),),
    "vec16 restrict": (Vectorize(16, 1), RestrictConst()),
    "vec16 fastmath": (Vectorize(16, 1), FastMath()),
    "vec16 x2 fastmath": (Vectorize(16, 2), FastMath()),
    "vec16 x4 fastmath": (Vectorize(16, 4), FastMath()),
    "vec16 block512": (Vectorize(16, 1), BlockSize((512,))),
}
TRANSPOSES: dict[str, tuple[Transform, ...]] = {
    f"tile {t}x{r}": (Apply(TiledTranspose(), (t, r)),) for t, r in TiledTranspose.space
}

_EXPERT_GELU = """
__global__ void gelu_forward_bf16(__nv_bfloat16* out, const __nv_bfloat16* inp, int N) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (((reinterpret_cast<unsigned long long>(inp) | reinterpret_cast<unsigned long long>(out)) % 16) == 0 && i + 8 <= N) {
        const uint4 packed = *reinterpret_cast<const uint4*>(inp + i);
        const __nv_bfloat162* in2 = reinterpret_cast<const __nv_bfloat162*>(&packed);
        uint4 result;
        __nv_bfloat162* out2 = reinterpret_cast<__nv_bfloat162*>(&result);
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            const float2 x = __bfloat1622float2(in2[k]);
            const float a = 0.5f * x.x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x.x + 0.044715f * x.x * x.x * x.x)));
            const float b = 0.5f * x.y * (1.0f + tanhf(GELU_SCALING_FACTOR * (x.y + 0.044715f * x.y * x.y * x.y)));
            out2[k] = __floats2bfloat162_rn(a, b);
        }
        *reinterpret_cast<uint4*>(out + i) = result;
    } else {
        for (int j = i; j < i + 8 && j < N; ++j) {
            const float x = __bfloat162float(inp[j]);
            out[j] = __float2bfloat16(0.5f * x * (1.0f + tanhf(GELU_SCALING_FACTOR * (x + 0.044715f * x * x * x))));
        }
    }
}
"""
_EXPERT_RESIDUAL = """
__global__ void residual_forward_bf16(__nv_bfloat16* out, const __nv_bfloat16* inp1, const __nv_bfloat16* inp2, int N) {
    const int i = (blockIdx.x * blockDim.x + threadIdx.x) * 8;
    const unsigned long long at = reinterpret_cast<unsigned long long>(out) | reinterpret_cast<unsigned long long>(inp1)
        | reinterpret_cast<unsigned long long>(inp2);
    if (at % 16 == 0 && i + 8 <= N) {
        const uint4 a = *reinterpret_cast<const uint4*>(inp1 + i);
        const uint4 b = *reinterpret_cast<const uint4*>(inp2 + i);
        const __nv_bfloat162* a2 = reinterpret_cast<const __nv_bfloat162*>(&a);
        const __nv_bfloat162* b2 = reinterpret_cast<const __nv_bfloat162*>(&b);
        uint4 result;
        __nv_bfloat162* out2 = reinterpret_cast<__nv_bfloat162*>(&result);
        #pragma unroll
        for (int k = 0; k < 4; ++k) {
            const float2 x = __bfloat1622float2(a2[k]), y = __bfloat1622float2(b2[k]);
            out2[k] = __floats2bfloat162_rn(x.x + y.x, x.y + y.y);
        }
        *reinterpret_cast<uint4*>(out + i) = result;
    } else {
        for (int j = i; j < i + 8 && j < N; ++j)
            out[j] = __float2bfloat16(__bfloat162float(inp1[j]) + __bfloat162float(inp2[j]));
    }
}
"""
CHECKS: tuple[tuple[str, dict[str, tuple[Transform, ...]], str], ...] = (
    ("gelu_bf16.cu", VECTORS, _EXPERT_GELU),
    ("residual_bf16.cu", VECTORS, _EXPERT_RESIDUAL),
    ("transpose_1d.cu", TRANSPOSES, ""),
    ("gelu.cu", VECTORS, ""),
)


def copy_ms(nbytes: int, samples: int = 30) -> float:
    """Median time of a CuPy device-to-device copy of ``nbytes``, L2 flushed before each sample."""
    import cupy as cp
    import numpy as np

    src, dst = cp.ones(nbytes, dtype=cp.uint8), cp.empty(nbytes, dtype=cp.uint8)
    l2 = cp.cuda.runtime.getDeviceProperties(0)["l2CacheSize"]
    flush = cp.empty(2 * l2, dtype=cp.uint8)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(samples + 3):
        flush.fill(1)
        start.record()
        dst.data.copy_from_device_async(src.data, nbytes)
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end))
    return float(np.median(times[3:]))


def candidates(
    target: Target, variants: dict[str, tuple[Transform, ...]], expert: str
) -> list[tuple[str, Any]]:
    """(label, sandbox Candidate) for each variant that applies (and the expert version)."""
    base = subject_for(target)
    out: list[tuple[str, Any]] = []
    for label, transforms in variants.items():
        done = apply_all(base, transforms)
        if isinstance(done, NotApplicable):
            print(f"{target.kernel} {label}: {done.reason}", file=sys.stderr)
            continue
        launch = done.launch if any((done.launch.grid, done.launch.block)) else None
        cand, why = target.candidate(label, Proposal(code=done.code, description=label, launch=launch))
        if cand is not None:
            out.append((label, cand))
        else:
            print(f"{target.kernel} {label}: {why}", file=sys.stderr)
    if expert:
        launch = LaunchChange(grid="cdiv(N, block * 8)")
        cand, why = target.candidate(
            "expert", Proposal(code=expert.strip(), description="expert", launch=launch)
        )
        if cand is not None:
            out.append(("expert bf162 pairs", cand))
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--deadline", type=float, default=120.0, help="seconds after which no new kernel starts")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    lines = (args.out / "vec_check.jsonl").open("a")
    t0 = time.monotonic()

    def emit(row: dict[str, Any]) -> None:
        row["t"] = round(time.monotonic() - t0, 1)
        lines.write(json.dumps(row) + "\n")
        lines.flush()
        print(json.dumps(row), flush=True)

    with LocalExecutor() as executor:
        device = executor.device_info()
        emit({"device": device.name, "peak_bandwidth_gbps": device.peak_bandwidth_gbps})
        for file, variants, expert in CHECKS:
            if time.monotonic() - t0 > args.deadline:
                emit({"kernel": file, "skipped": "deadline"})
                continue
            target = target_for(Document.from_file(KERNELS / file))
            moved = target.bench_problem.bytes_moved
            same_copy = copy_ms(moved // 2)
            emit(
                {
                    "kernel": file,
                    "copy_bytes": moved // 2,
                    "copy_ms": same_copy,
                    "copy_gbps": moved / same_copy / 1e6,
                }
            )
            cands = candidates(target, variants, expert)
            labels = {c.id: label for label, c in cands}
            request = target.request(
                f"vec-{file}", tuple(c for _, c in cands), seeds=(1,), budget=Budget(timeout_s=60.0)
            )
            result = executor.evaluate(request)
            rows = [("baseline", result.baseline)] + [
                (labels.get(c.candidate_id, c.candidate_id), c) for c in result.candidates
            ]
            for label, r in rows:
                ms = r.timing.median_ms if r.timing is not None else 0.0
                emit(
                    {
                        "kernel": file,
                        "label": label,
                        "status": r.status.value,
                        "message": r.message[:300],
                        "median_ms": ms,
                        "gbps": r.achieved_gbps,
                        "pct_peak": r.pct_peak_bandwidth,
                        "pct_of_same_copy": 100.0 * same_copy / ms if ms > 0 else 0.0,
                        "speedup": r.speedup,
                    }
                )
    lines.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
