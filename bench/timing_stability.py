"""Timing stability: the same kernel timed against itself, as an optimize run times a candidate.

    python3 bench/timing_stability.py --out DIR          # on a GPU machine, ~2-3 minutes

For each kernel, ``--runs`` separate evaluations through one :class:`LocalExecutor`, each an
``EvalRequest`` whose only candidate is the kernel itself: verified, then timed interleaved with
the baseline in pairs on shared buffers (the optimize loop's request, with its default per-candidate
budget).  Meanwhile (``--load``) NVRTC keeps compiling variants of the kernel in a compile pool, as
the next candidates of an optimize run do, and a second worker on the same GPU keeps verifying the
kernel (``time=False``), as another run or editor benchmark would.

A kernel passes when every run's median paired ratio is within ``--tolerance`` (2%) of 1 and every
run's pessimistic bound (first quartile of the paired ratios) is at least ``--min-low`` (0.95).

Kernels: an 8192x8192 fp32 transpose by a 1-D index (``bench/kernels/transpose_1d.cu``), a 3x3 box
filter over a 3x2048x2048 uint8 image on a 3-D grid (``tests/data/trust/box_filter.cu``), a 2^24
element histogram into 256 bins with global atomics (``bench/kernels/histogram.cu``, an ``inout``
array restored before every timed launch) and a vector add of 2^24 floats
(``tests/data/trust/vadd.cu``).

Appends one JSON line per evaluation to ``DIR/timing_stability.jsonl`` as it goes, writes
``DIR/timing_stability.json`` (device, date, command, commit, per-kernel summary) and prints a
table.  Stops itself within ``--total-s`` seconds: each kernel gets an equal share of what is left,
and a kernel whose share is spent keeps the runs it has.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox_bench import git_commit  # noqa: E402  (bench/ is the script's own folder)

from agent import loop  # noqa: E402
from agent.target import Target, target_for  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from sandbox.compile_pool import CompilePool  # noqa: E402
from sandbox.contract import Candidate, EvalOptions, Status, to_dict  # noqa: E402
from sandbox.local import LocalExecutor  # noqa: E402
from sandbox.wire import DEFAULT_HANDLER  # noqa: E402

# the cheap ones first: the 8192^2 transpose (256 MiB arrays, references drawn and checked on the
# host) needs the most time per evaluation and gets what the others leave
KERNELS = (
    ("vadd", ROOT / "tests" / "data" / "trust" / "vadd.cu", "vadd"),
    ("histogram", ROOT / "bench" / "kernels" / "histogram.cu", "histogram"),
    ("box_filter", ROOT / "tests" / "data" / "trust" / "box_filter.cu", "box_filter"),
    ("transpose_1d", ROOT / "bench" / "kernels" / "transpose_1d.cu", "transpose_1d"),
)


@dataclass
class Compiling:
    """The CPU load of an optimize run: the next candidates compiling in a ``CompilePool`` (as many
    processes as the executor's own) while the current ones are timed; distinct sources, so
    every one is really compiled."""

    target: Target
    stop: threading.Event
    arch: str
    compiles: int = 0

    def run(self) -> None:
        pool = CompilePool()
        try:
            pending: list[Future[Any]] = []
            while not self.stop.is_set():
                while len(pending) < 16:
                    source = f"// variant {self.compiles + len(pending)}\n{self.target.baseline.source}"
                    pending.append(
                        pool.submit(source, name_expressions=(self.target.kernel,), arch=self.arch)
                    )
                wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                done = [f for f in pending if f.done()]
                self.compiles += len(done)
                pending = [f for f in pending if not f.done()]
        finally:
            pool.close()


@dataclass
class Verifying:
    """A second worker on the same GPU verifying ``target``'s kernel over and over until stopped."""

    target: Target
    stop: threading.Event
    handler: str = DEFAULT_HANDLER
    evaluations: int = 0
    error: str = ""

    def run(self) -> None:
        request = self.target.request(
            "stability-verify", (Candidate("verify", self.target.baseline),), options=EvalOptions(time=False)
        )
        try:
            with LocalExecutor(handler=self.handler) as ex:
                while not self.stop.is_set():
                    result = ex.evaluate(request, cancel=self.stop)
                    self.evaluations += result.candidates[0].status == Status.OK
        except Exception as exc:  # report it with the results, do not end the measurement
            self.error = f"{type(exc).__name__}: {exc}"


def run_kernel(
    ex: LocalExecutor,
    name: str,
    target: Target,
    runs: int,
    until: float,
    log: Path,
    load: Load,
) -> list[dict[str, Any]]:
    stop = threading.Event()
    other = Verifying(target, stop, load.handler)
    compiling = Compiling(target, stop, load.arch)
    threads = []
    if load.verify:
        threads.append(threading.Thread(target=other.run, name="verify", daemon=True))
    if load.compile:
        threads.append(threading.Thread(target=compiling.run, name="compile", daemon=True))
    for t in threads:
        t.start()
    rows: list[dict[str, Any]] = []
    try:
        for r in range(runs):
            if rows and time.monotonic() + max(row["seconds"] for row in rows) > until:
                break  # the next run would not fit this kernel's share of the time
            started = time.monotonic()
            request = target.request(
                f"stability-{name}-{r}",
                (Candidate("self", target.baseline),),
                budget=loop.LoopSettings().eval_budget,
            )
            result = ex.evaluate(request)
            c = result.candidates[0]
            row = {
                "kernel": name,
                "run": r,
                "status": c.status.value,
                "message": c.message,
                "ratio": c.speedup,
                "low": c.speedup_low,
                "high": c.speedup_high,
                "pairs": c.pairs,
                "note": c.note,
                "baseline_ms": c.baseline_timing.median_ms if c.baseline_timing else 0.0,
                "candidate_ms": c.timing.median_ms if c.timing else 0.0,
                "candidate_q1_ms": c.timing.q1_ms if c.timing else 0.0,
                "candidate_q3_ms": c.timing.q3_ms if c.timing else 0.0,
                "alone_ms": result.baseline.timing.median_ms if result.baseline.timing else 0.0,
                "concurrent_verifications": other.evaluations if load.verify else None,
                "concurrent_compiles": compiling.compiles if load.compile else None,
                "seconds": time.monotonic() - started,
            }
            rows.append(row)
            with log.open("a", encoding="utf-8") as out:
                out.write(json.dumps(row) + "\n")
            print(
                f"  {name} run {r}: {c.status.value} ratio {c.speedup:.4f} "
                f"[{c.speedup_low:.4f}-{c.speedup_high:.4f}] {c.pairs} pairs {row['seconds']:.1f} s"
                + (f" ({c.note})" if c.note else ""),
                file=sys.stderr,
                flush=True,
            )
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    if other.error:
        print(f"  {name}: the concurrent verifier failed: {other.error}", file=sys.stderr)
    return rows


@dataclass(frozen=True)
class Load:
    """What else runs while the kernels are timed."""

    verify: bool
    compile: bool
    handler: str
    arch: str


def summary(
    name: str, rows: list[dict[str, Any]], runs: int, tolerance: float, min_low: float
) -> dict[str, Any]:
    ok = [r for r in rows if r["status"] == Status.OK.value]
    ratios = [r["ratio"] for r in ok]
    lows = [r["low"] for r in ok]
    passed = (
        len(ok) == len(rows) == runs
        and all(abs(x - 1.0) <= tolerance for x in ratios)
        and all(x >= min_low for x in lows)
    )
    return {
        "kernel": name,
        "runs": len(rows),
        "ok": len(ok),
        "ratios": ratios,
        "ratio_min": min(ratios, default=0.0),
        "ratio_max": max(ratios, default=0.0),
        "lows": lows,
        "low_min": min(lows, default=0.0),
        "median_ms": sorted(r["candidate_ms"] for r in ok)[len(ok) // 2] if ok else 0.0,
        "notes": sorted({r["note"] for r in rows if r["note"]}),
        "failures": sorted({r["message"] for r in rows if r["status"] != Status.OK.value}),
        "passed": passed,
    }


def table(kernels: list[dict[str, Any]], tolerance: float, min_low: float) -> str:
    lines = [
        f"pass: every run's median paired ratio within 1 +- {tolerance:g} and pessimistic bound >= {min_low:g}",
        f"{'kernel':14} {'runs':>4} {'median ms':>10} {'ratio min':>9} {'ratio max':>9} {'low min':>8}  result",
    ]
    for k in kernels:
        lines.append(
            f"{k['kernel']:14} {k['runs']:>4} {k['median_ms']:>10.4f} {k['ratio_min']:>9.4f} "
            f"{k['ratio_max']:>9.4f} {k['low_min']:>8.4f}  {'PASS' if k['passed'] else 'FAIL'}"
        )
        lines.append(f"{'':14} ratios {' '.join(f'{x:.4f}' for x in k['ratios'])}")
        lines.append(f"{'':14} lows   {' '.join(f'{x:.4f}' for x in k['lows'])}")
        for extra in (*k["notes"], *k["failures"]):
            lines.append(f"{'':14} {extra}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for timing_stability.{jsonl,json}")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--total-s", type=float, default=200.0, help="stop within this many seconds")
    parser.add_argument("--tolerance", type=float, default=0.02)
    parser.add_argument("--min-low", type=float, default=0.95)
    parser.add_argument("--only", default="", help="comma-separated kernel names (default: all)")
    parser.add_argument(
        "--load",
        default="compile,verify",
        help="what runs meanwhile: compile (NVRTC compiles in a pool, as the next candidates of an "
        "optimize run), verify (a second worker verifying the kernel on the same GPU), both, or none",
    )
    parser.add_argument(
        "--handler",
        default=DEFAULT_HANDLER,
        help="worker handler (sandbox_fakes:ScriptedHandler: a dry run, no GPU)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    started = time.monotonic()
    deadline = started + args.total_s
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "timing_stability.jsonl"
    chosen = [k for k in KERNELS if not args.only or k[0] in args.only.split(",")]
    kernels: list[dict[str, Any]] = []
    ex = LocalExecutor(handler=args.handler)
    try:
        info = ex.device_info()
        kinds = {k for k in args.load.split(",") if k and k != "none"}
        if kinds - {"compile", "verify"}:
            parser.error(f"--load {args.load}: name compile, verify or none")
        arch = "sm_" + info.compute_capability.replace(".", "")
        load = Load("verify" in kinds, "compile" in kinds, args.handler, arch)
        for i, (name, path, kernel) in enumerate(chosen):
            share = (deadline - time.monotonic()) / (len(chosen) - i)
            target = target_for(Document.from_file(path), kernel)
            print(f"{name}: {args.runs} runs within {share:.0f} s", file=sys.stderr, flush=True)
            until = time.monotonic() + share
            rows = run_kernel(ex, name, target, args.runs, until, log, load)
            kernels.append(summary(name, rows, args.runs, args.tolerance, args.min_low))
    finally:
        ex.close()
    report = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": shlex.join([Path(sys.executable).name, *sys.argv]),
        "commit": git_commit(),
        "device": to_dict(info),
        "bwrap": ex.sandboxed,
        "load": sorted(kinds),
        "eval_budget": to_dict(loop.LoopSettings().eval_budget),
        "criterion": {"ratio_within": args.tolerance, "min_low": args.min_low},
        "seconds": time.monotonic() - started,
        "kernels": kernels,
        "passed": all(k["passed"] for k in kernels),
    }
    (args.out / "timing_stability.json").write_text(json.dumps(report, indent=2))
    print(table(kernels, args.tolerance, args.min_low))
    print(f"{'all passed' if report['passed'] else 'NOT all passed'} in {report['seconds']:.0f} s")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
