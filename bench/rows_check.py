"""The row-reduction kernels of bench/kernels/ through the built-in engine on a GPU, with timings.

    python3 bench/rows_check.py --out $OUT --deadline 150     # on a GPU machine

For each kernel (softmax, softmax_double, attention_softmax, layernorm, layernorm_stats, row_max,
matvec, reduce_interleaved) one optimize run with the built-in proposer through the sandbox's
LocalExecutor (one GPU), under ``--budget`` seconds of search (the wall-time budget starts once
the original is measured).  As each run ends, one JSON line goes to ``OUT/rows_check.jsonl``:
outcome, speedup with its range, % of the copy bandwidth before and after, the winner, the time
spent measuring the original (``baseline_s``) and each attempt's verdict, speedup and seconds.
The first-batch guess of each pass is the first attempt.  compute-sanitizer on the winner is
skipped unless ``--sanitize``.  Kernels that would not finish inside ``--deadline`` seconds are
skipped (a line says so); a run in flight is cancelled at the deadline.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.builtin import BuiltinProposer  # noqa: E402
from agent.loop import LoopSettings, optimize  # noqa: E402
from agent.proposer import OptimizeBudget  # noqa: E402
from agent.target import target_for  # noqa: E402
from cudasrc.source import Document  # noqa: E402

KERNELS = (
    "matvec.cu",
    "reduce_interleaved.cu",
    "softmax_double.cu",
    "layernorm_stats.cu",
    "softmax.cu",
    "attention_softmax.cu",
    "layernorm.cu",
    "row_max.cu",
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--deadline", type=float, default=150.0, help="seconds for everything")
    ap.add_argument("--budget", type=float, default=10.0, help="search seconds per kernel")
    ap.add_argument("--sanitize", action="store_true", help="run compute-sanitizer on each winner")
    ap.add_argument("--only", nargs="*", default=(), help="kernel files to run (default: all)")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "rows_check.jsonl"
    from sandbox.local import LocalExecutor

    t0 = time.monotonic()
    end = t0 + args.deadline
    with LocalExecutor((0,)) as ex, out.open("a", encoding="utf-8") as sink:

        def emit(row: dict[str, object]) -> None:
            sink.write(json.dumps(row) + "\n")
            sink.flush()

        for name in args.only or KERNELS:
            left = end - time.monotonic()
            if left < args.budget + 8:
                emit({"kernel": name, "skipped": f"{left:.0f} s left of the {args.deadline:.0f} s deadline"})
                continue
            target = target_for(Document.from_file(ROOT / "bench" / "kernels" / name))
            cancel = threading.Event()
            timer = threading.Timer(left, cancel.set)
            timer.daemon = True
            timer.start()
            started = time.monotonic()
            proposer = BuiltinProposer()
            try:
                res = optimize(
                    target,
                    proposer,
                    ex,
                    budget=OptimizeBudget(wall_s=args.budget),
                    settings=LoopSettings(sanitize_winner=args.sanitize),
                    cancel=cancel,
                )
            except Exception as exc:  # a broken kernel must not end the check
                emit({"kernel": name, "error": repr(exc)})
                continue
            finally:
                timer.cancel()
                proposer.close()
            best = res.best
            b = res.baseline
            emit(
                {
                    "kernel": name,
                    "outcome": res.outcome.value,
                    "stop_reason": str(res.stop),
                    "speedup": [res.speedup_low, res.speedup, res.speedup_high],
                    "baseline_ms": b.timing.median_ms if b.timing else None,
                    "pct_copy_before": b.pct_peak_bandwidth,
                    "pct_copy_after": best.result.pct_peak_bandwidth if best else None,
                    "winner": best.proposal.description if best else None,
                    "sanitizer": best.result.sanitizer if best else None,
                    "baseline_s": round(res.baseline_seconds, 2),
                    "seconds": round(time.monotonic() - started, 2),
                    "attempts": [
                        [
                            a.candidate_id,
                            a.result.status.value,
                            round(a.result.speedup, 3),
                            round(a.result.pct_peak_bandwidth, 1),
                            round(a.result.seconds, 2),
                            a.proposal.description[:100],
                            a.result.message[:160],
                        ]
                        for a in res.history
                    ],
                }
            )
    print(f"wrote {out} in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
