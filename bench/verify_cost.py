"""Per-candidate cost of verification + timing, on the host (before) and on the device (after).

    python3 bench/verify_cost.py --out DIR [--deadline 450]      # on a GPU machine

For outputs of 1 M, 16 M and 100 M fp32 elements: a baseline ``c = a*b + a`` (two roundings) and
a candidate computing it with one ``fmaf`` (different last bits, so every element is really
compared, as for any honest rewrite), verified on n=1, n=4097 and the size on 3 seeds (the size
on the first seed only, as in a timed run), then timed paired with the baseline and the outputs
of the timed runs re-checked.  Both paths run in this process through the worker's own
``GpuHandler``; ``device_verify`` picks the path.  ``setup_s``: the baseline's evaluation (inputs
drawn, references computed); ``per_candidate_s``: each candidate's evaluation, with median,
quartiles, min and max.  Then the small-kernel rate: ``--small`` candidates at n=2^16 through the
device path, verified + timed per second.

One JSON line per measurement is appended to ``DIR/verify_cost.jsonl`` as it goes; a step that
fails is recorded and the rest continue; no step starts after ``--deadline`` seconds (the host
path at 100 M is skipped when the time left cannot hold it), and the process stops itself
``GRACE_S`` after the deadline whatever it is doing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox.contract import (  # noqa: E402
    ArgSpec,
    Budget,
    Candidate,
    EvalRequest,
    KernelSource,
    Launch,
    Problem,
    Status,
)

GRACE_S = 30.0
SIZES = (1 << 20, 1 << 24, 100_000_000)
BUDGET = Budget(
    timeout_s=300.0, time_budget_ms=40.0, min_samples=10, max_samples=100, gpu_memory_bytes=16 << 30
)
BASELINE = r"""
extern "C" __global__ void k(const float* __restrict__ a, const float* __restrict__ b,
                             float* __restrict__ c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = __fadd_rn(__fmul_rn(a[i], b[i]), a[i]);
}
"""
CANDIDATE = r"""
extern "C" __global__ void k(const float* __restrict__ a, const float* __restrict__ b,
                             float* __restrict__ c, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        c[i] = fmaf(a[i], b[i], a[i]);
}
"""


def problem(n: int) -> Problem:
    return Problem(
        label=f"n={n}",
        sizes={"n": n},
        args=(
            ArgSpec("a", "in", "float32", n),
            ArgSpec("b", "in", "float32", n),
            ArgSpec("c", "out", "float32", n),
            ArgSpec("n", "scalar", "int32", value=n),
        ),
        launch=Launch(((n + 255) // 256, 1, 1), (256, 1, 1)),
        bytes_moved=12 * n,
        flops=2 * n,
    )


def request(n: int, count: int, rid: str) -> EvalRequest:
    verify = tuple(problem(m) for m in (1, 4097))
    launches = tuple(
        Launch((max(1, min((m + 255) // 256, 132 * 8)), 1, 1), (256, 1, 1)) for m in (1, 4097, n)
    )
    cands = tuple(
        Candidate(f"c{i}", KernelSource(CANDIDATE, "k", filename="c.cu"), launches) for i in range(count)
    )
    return EvalRequest(
        id=rid,
        baseline=KernelSource(BASELINE, "k", filename="b.cu"),
        candidates=cands,
        verify_problems=verify,
        bench_problem=problem(n),
        seeds=(1, 2, 3),
        budget=BUDGET,
    )


def spread(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {}
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return {"median": statistics.median(xs), "q1": q[0], "q3": q[2], "min": min(xs), "max": max(xs)}


class Run:
    def __init__(self, out: Path, deadline: float) -> None:
        self.path = out / "verify_cost.jsonl"
        self.start = time.monotonic()
        self.deadline = deadline

    def left(self) -> float:
        return self.deadline - (time.monotonic() - self.start)

    def emit(self, record: dict[str, Any]) -> None:
        record["t_s"] = round(time.monotonic() - self.start, 2)
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        print(json.dumps(record), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--deadline", type=float, default=450.0)
    parser.add_argument("--candidates", type=int, default=5, help="candidates per size on the device path")
    parser.add_argument("--small", type=int, default=40, help="small candidates for the rate")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    run = Run(args.out, args.deadline)
    signal.signal(signal.SIGALRM, lambda *_: (run.emit({"event": "deadline", "stopped": True}), os._exit(3)))
    signal.alarm(int(args.deadline + GRACE_S))
    os.environ.setdefault("XDG_CACHE_HOME", tempfile.mkdtemp())

    from sandbox.compiler import compile_cuda
    from sandbox.gpu_handler import GpuHandler
    from sandbox.wire import Binary, EvalJob

    handler = GpuHandler(0, "cupy")
    arch = "sm_" + handler.info.compute_capability.replace(".", "")
    binaries = {}
    for name, source in (("baseline", BASELINE), ("candidate", CANDIDATE)):
        compiled = compile_cuda(source, name_expressions=("k",), arch=arch)
        assert compiled.result.ok, compiled.result.log
        binaries[name] = Binary(compiled.binary, compiled.result.lowered_names.get("k", "k"))
    run.emit({"event": "start", "device": handler.info.name, "sizes": SIZES})

    def measure(path: str, n: int, count: int) -> float:
        """Setup and per-candidate seconds of one path at size n; returns the median per candidate."""
        handler.device_verify = path == "device"
        handler._state = None  # a fresh verifier: inputs drawn and references computed anew
        req = request(n, count, f"{path}-{n}")
        t0 = time.perf_counter()
        base = handler.evaluate(EvalJob(req, binaries["baseline"], -1))
        setup = time.perf_counter() - t0
        per: list[float] = []
        statuses = []
        for i in range(count):
            if per and run.left() < 2 * max(per):
                break
            t0 = time.perf_counter()
            res = handler.evaluate(EvalJob(req, binaries["baseline"], i, binaries["candidate"]))
            per.append(time.perf_counter() - t0)
            statuses.append(
                res.status.value if res.status is Status.OK else f"{res.status.value}: {res.message}"
            )
        run.emit(
            {
                "event": "cost",
                "path": path,
                "outputs": n,
                "setup_s": setup,
                "baseline_status": base.status.value,
                "candidates": len(per),
                "per_candidate_s": spread(per),
                "samples": per,
                "statuses": statuses,
                "note": "3 seeds; sizes 1, 4097 and n (n on the first seed); paired timing; timed re-check",
            }
        )
        handler._state = None
        handler.rt.array_module().get_default_memory_pool().free_all_blocks()
        return statistics.median(per) if per else float("inf")

    device_cost: dict[int, float] = {}
    for n in SIZES:
        if run.left() <= 0:
            break
        try:
            device_cost[n] = measure("device", n, args.candidates)
        except Exception as exc:
            run.emit(
                {
                    "event": "error",
                    "path": "device",
                    "outputs": n,
                    "error": repr(exc),
                    "trace": traceback.format_exc()[-2000:],
                }
            )
    try:  # the small-kernel rate: verified + timed candidates per second on the device path
        handler.device_verify = True
        handler._state = None
        req = request(1 << 16, args.small, "small")
        handler.evaluate(EvalJob(req, binaries["baseline"], -1))
        t0 = time.perf_counter()
        ok = sum(
            handler.evaluate(EvalJob(req, binaries["baseline"], i, binaries["candidate"])).status is Status.OK
            for i in range(args.small)
        )
        seconds = time.perf_counter() - t0
        run.emit(
            {
                "event": "small_rate",
                "path": "device",
                "outputs": 1 << 16,
                "candidates": args.small,
                "ok": ok,
                "seconds": seconds,
                "candidates_per_s": args.small / seconds,
                "note": "verify (3 sizes x 3 seeds) + paired timing + re-check per candidate, in process (no compile)",
            }
        )
    except Exception as exc:
        run.emit(
            {"event": "error", "path": "small", "error": repr(exc), "trace": traceback.format_exc()[-2000:]}
        )
    previous = 0.0
    for n in SIZES:  # the host path, as long as the time left can hold it (the cost grows with n)
        estimate = previous * n / (SIZES[SIZES.index(n) - 1] if previous else n) * 3
        if run.left() <= 0 or estimate > run.left():
            run.emit(
                {
                    "event": "skipped",
                    "path": "host",
                    "outputs": n,
                    "estimate_s": estimate,
                    "left_s": run.left(),
                }
            )
            continue
        try:
            previous = measure("host", n, 2 if n >= SIZES[-1] else 3)
        except Exception as exc:
            run.emit(
                {
                    "event": "error",
                    "path": "host",
                    "outputs": n,
                    "error": repr(exc),
                    "trace": traceback.format_exc()[-2000:],
                }
            )
    run.emit({"event": "done", "device_per_candidate_s": {str(k): v for k, v in device_cost.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
