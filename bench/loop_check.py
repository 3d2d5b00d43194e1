"""The optimize loop on a real GPU: a fixed proposer through the sandbox's LocalExecutor.

    python bench/loop_check.py --out bench/results      # on a GPU machine

Optimizes ``tests/data/optimize/saxpy_poor_block.cu`` (saxpy launched with 32-thread blocks)
with a scripted proposer: a block-size sweep (one batch), then a wrong kernel, a kernel that does
not compile and ``__restrict__`` pointers at block 256 (a second batch).  Checks the loop end to
end where it matters — verdicts, speedup with spread, % of peak, the winner's compute-sanitizer
run, launch-site edit, diff, trajectory — and writes ``loop_check.json`` and ``loop_check.md`` (device, date, command, commit).
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.loop import LoopEvent, LoopSettings, optimize  # noqa: E402
from agent.proposal import Attempt, Proposal  # noqa: E402
from agent.proposer import OptimizeBudget, OptimizeContext, Proposer  # noqa: E402
from agent.target import Target, target_for  # noqa: E402
from agent.trajectory import TrajectoryLog  # noqa: E402
from cudasrc.launch import LaunchChange  # noqa: E402
from cudasrc.source import Document  # noqa: E402

KERNEL = ROOT / "tests" / "data" / "optimize" / "saxpy_poor_block.cu"


class Fixed(Proposer):
    name = "fixed"

    def __init__(self, t: Target) -> None:
        d = t.definition
        restrict = d.replace("const float* x, float* y", "const float* __restrict__ x, float* __restrict__ y")
        self.batches = [
            [Proposal(d, f"block {b}", launch=LaunchChange(block=str(b))) for b in (64, 128, 256, 512, 1024)],
            [
                Proposal(d.replace("alpha * x[i] + y[i]", "alpha * x[i] - y[i]"), "wrong sign"),
                Proposal(d.replace("y[i] = alpha", "y[i] = alpah"), "typo"),
                Proposal(
                    restrict, "restrict, block 256", ("x and y never alias",), LaunchChange(block="256")
                ),
            ],
        ]

    def propose(self, context: OptimizeContext, history: Sequence[Attempt], n: int) -> list[Proposal]:
        return self.batches.pop(0) if self.batches else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--commit", default="", help="The commit measured, when run outside a git checkout.")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    from sandbox.local import LocalExecutor

    target = target_for(Document.from_file(KERNEL))
    events: list[tuple[float, LoopEvent]] = []
    traj = args.out / "loop_check.trajectory.jsonl"
    traj.unlink(missing_ok=True)
    t0 = time.monotonic()
    with LocalExecutor((0,)) as ex:
        res = optimize(
            target,
            Fixed(target),
            ex,
            budget=OptimizeBudget(wall_s=300),
            settings=LoopSettings(batch_size=8),
            on_event=lambda e: events.append((time.monotonic() - t0, e)),
            trajectory=TrajectoryLog(traj),
        )
    b = res.baseline
    rows = []
    for line in traj.read_text().splitlines():
        a = json.loads(line)
        r = a["result"]
        rows.append(
            {
                "candidate": a["candidate_id"],
                "proposal": a["proposal"]["description"],
                "status": r["status"],
                "median_ms": r["timing"]["median_ms"] if r["timing"] else None,
                "speedup": r["speedup"],
                "speedup_low": r["speedup_low"],
                "speedup_high": r["speedup_high"],
                "gbps": r["achieved_gbps"],
                "pct_peak": r["pct_peak_bandwidth"],
                "reward": a["reward"],
                "message": r["message"][:100],
            }
        )
    baseline_at = next(t for t, e in events if e.kind == "baseline")
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
    except OSError:  # no git where it runs
        commit = ""
    summary = {
        "device": res.device.name if res.device else None,
        "peak_bandwidth_gbps": res.device.peak_bandwidth_gbps if res.device else None,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python " + shlex.join(sys.argv),
        "commit": args.commit or commit or "unknown",
        "baseline": {
            "median_ms": b.timing.median_ms if b.timing else None,
            "gbps": b.achieved_gbps,
            "pct_peak": b.pct_peak_bandwidth,
        },
        "attempts": rows,
        "outcome": res.outcome.value,
        "stop_reason": str(res.stop),
        "speedup": [res.speedup_low, res.speedup, res.speedup_high],
        "verification": [(v.label, v.seeds, v.ok) for v in res.verification],
        "sanitizer": res.best.result.sanitizer if res.best else None,
        "launch_edits": len(res.launch_edits),
        "seconds_total": res.seconds,
        "seconds_to_baseline": baseline_at,
        "diff": res.diff,
    }
    (args.out / "loop_check.json").write_text(json.dumps(summary, indent=2) + "\n")
    md = [
        "# Optimize loop on the GPU (`bench/loop_check.py`)",
        "",
        f"- device: {summary['device']} (measured copy ceiling {summary['peak_bandwidth_gbps']:.0f} GB/s)",
        f"- date: {summary['date']}; commit {summary['commit']}; command: `{summary['command']}`",
        f"- baseline (block 32): {summary['baseline']['median_ms']:.4f} ms, {b.achieved_gbps:.0f} GB/s = {b.pct_peak_bandwidth:.1f}% of peak",
        f"- outcome: {res.outcome.value}, {res.speedup:.2f}x [{res.speedup_low:.2f}x-{res.speedup_high:.2f}x]; "
        f"stop: {res.stop}; {res.attempts} attempts in {res.seconds:.1f} s "
        f"(baseline verdict after {baseline_at:.1f} s: worker start, device ceilings, compile)",
        f"- winner under compute-sanitizer (after the search): {summary['sanitizer']}",
        "",
        "| candidate | proposal | status | median ms | speedup [low-high] | GB/s | % peak | reward |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ms = f"{r['median_ms']:.4f}" if r["median_ms"] else "-"
        sp = f"{r['speedup']:.2f} [{r['speedup_low']:.2f}-{r['speedup_high']:.2f}]" if r["speedup"] else "-"
        md.append(
            f"| {r['candidate']} | {r['proposal']} | {r['status']} | {ms} | {sp} | {r['gbps']:.0f} | {r['pct_peak']:.1f} | {r['reward']:.2f} |"
        )
    md += ["", "```diff", res.diff.rstrip(), "```", ""]
    (args.out / "loop_check.md").write_text("\n".join(md))
    print("\n".join(md))


if __name__ == "__main__":
    main()
