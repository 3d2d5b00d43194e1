"""The suite on 1 GPU and on N GPUs, locally and through a Ray cluster on this host: wall-time ratio,
identical verdicts, speedups within each other's ranges.  For a multi-GPU machine (issue 18).

    python3 bench/multigpu_suite.py OUT_DIR [--gpus N] [--phases local-1,local-N,ray-1,ray-N]
                                    [--match GLOB] [--budget 4c] [--limit-s 220]

Each phase runs ``python3 -m server suite bench/kernels --json --jsonl OUT_DIR/<phase>.jsonl``
(local: ``--gpus 0`` / ``--gpus 0,..,N-1``; Ray: a head started here with ``ray start --head
--num-gpus=1|N`` on GPUs 0..N-1 and the CLI pointed at it with ``CUDA_AGENT_RAY_ADDRESS``, then
``ray stop``).  A phase past its share of ``--limit-s`` is killed; its JSONL keeps the kernels it
finished.  Everything lands in ``OUT_DIR/multigpu.jsonl`` as it happens, one JSON object a line:

- ``{"event": "host", ...}``: date, commit, GPUs (nvidia-smi), whether Ray is importable;
- ``{"event": "phase", "phase", "gpus", "wall_s", "returncode", "kernels", "summary", "gpus_used",
  "one_gpu_per_kernel"}`` after each phase;
- ``{"event": "compare", "phases": [one, many], "wall_ratio", "same_verdicts", "verdict_diffs",
  "speedups_within_ranges", "range_misses", "kernels"}`` for local-1 vs local-N, ray-1 vs ray-N and
  local-N vs ray-N, over the kernels both phases finished.

Phases can run in separate calls (the comparison reads the JSONL files already in OUT_DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RAY_PORT = 6390
RAY_CLI = (sys.executable, "-m", "ray.scripts.scripts")  # the `ray` command, wherever Ray is installed
PHASES = ("local-1", "local-N", "ray-1", "ray-N")
PAIRS = (("local-1", "local-N"), ("ray-1", "ray-N"), ("local-N", "ray-N"))


def emit(out: Path, record: dict[str, Any]) -> None:
    with (out / "multigpu.jsonl").open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    print(json.dumps(record)[:400], flush=True)


def host(gpus: int) -> dict[str, Any]:
    smi = shutil.which("nvidia-smi")
    names = (
        subprocess.run(
            [smi, "--query-gpu=index,name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
        ).stdout.splitlines()
        if smi
        else []
    )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    ray = subprocess.run(
        [sys.executable, "-c", "import ray; print(ray.__version__)"], capture_output=True, text=True
    )
    return {
        "event": "host",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit.stdout.strip() or os.environ.get("COMMIT", "unknown"),
        "gpus_listed": names,
        "gpus_used": gpus,
        "ray": ray.stdout.strip() if ray.returncode == 0 else f"not importable: {ray.stderr.strip()[-200:]}",
    }


def run_phase(phase: str, n: int, args: argparse.Namespace, out: Path, limit_s: float) -> dict[str, Any]:
    count = 1 if phase.endswith("-1") else n
    jsonl = out / f"{phase}.jsonl"
    jsonl.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "server", "suite", str(ROOT / "bench" / "kernels"), "--budget", args.budget]
    cmd += [
        "--match",
        args.match,
        "--seed",
        "0",
        "--json",
        "--jsonl",
        str(jsonl),
        "--deadline",
        str(args.deadline),
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    ray_started = False
    if phase.startswith("ray"):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(count)))
        start = subprocess.run(
            [
                *RAY_CLI,
                "start",
                "--head",
                f"--port={RAY_PORT}",
                f"--num-gpus={count}",
                "--include-dashboard=false",
            ],
            capture_output=True,
            text=True,
            env={**env, "RAY_USAGE_STATS_ENABLED": "0"},
        )
        if start.returncode != 0:
            return {
                "event": "phase",
                "phase": phase,
                "gpus": count,
                "error": f"ray start: {start.stderr[-400:]}",
            }
        ray_started = True
        env["CUDA_AGENT_RAY_ADDRESS"] = f"127.0.0.1:{RAY_PORT}"
    else:
        cmd += ["--gpus", ",".join(map(str, range(count)))]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
    wall = time.monotonic() - started
    if ray_started:
        subprocess.run([*RAY_CLI, "stop"], capture_output=True, env=env)
    (out / f"{phase}.stderr").write_text(stderr)
    entries = read_jsonl(jsonl)
    summary = json.loads(stdout)["summary"] if proc.returncode == 0 and stdout.strip() else None
    used = sorted({g for e in entries for g in e.get("gpus", [])})
    return {
        "event": "phase",
        "phase": phase,
        "gpus": count,
        "wall_s": round(wall, 2),
        "returncode": proc.returncode,
        "kernels": len(entries),
        "summary": summary,
        "gpus_used": used,
        "one_gpu_per_kernel": all(len(e.get("gpus", [])) == 1 for e in entries if e["status"] != "error"),
        "stderr_tail": stderr.strip().splitlines()[-3:],
    }


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def compare(out: Path, one: str, many: str) -> dict[str, Any] | None:
    a = {(e["file"], e["kernel"]): e for e in read_jsonl(out / f"{one}.jsonl")}
    b = {(e["file"], e["kernel"]): e for e in read_jsonl(out / f"{many}.jsonl")}
    both = sorted(set(a) & set(b))
    if not both:
        return None
    walls = {p["phase"]: p["wall_s"] for p in read_jsonl(out / "multigpu.jsonl") if p.get("event") == "phase"}
    diffs, misses = [], []
    for key in both:
        x, y = a[key], b[key]
        if (x["status"], x["description"]) != (y["status"], y["description"]):
            diffs.append(
                {
                    "kernel": key[1],
                    one: [x["status"], x["description"]],
                    many: [y["status"], y["description"]],
                }
            )
        if x["status"] == y["status"] == "improved":
            overlap = x["speedup_low"] <= y["speedup_high"] and y["speedup_low"] <= x["speedup_high"]
            if not overlap:
                misses.append(
                    {
                        "kernel": key[1],
                        one: [x["speedup_low"], x["speedup"], x["speedup_high"]],
                        many: [y["speedup_low"], y["speedup"], y["speedup_high"]],
                    }
                )
    # the wall ratio means something only when both phases finished the same kernels
    complete = len(a) == len(b) == len(both)
    return {
        "event": "compare",
        "phases": [one, many],
        "kernels": len(both),
        "wall_ratio": round(walls[one] / walls[many], 3)
        if complete and one in walls and many in walls
        else None,
        "same_verdicts": not diffs,
        "verdict_diffs": diffs,
        "speedups_within_ranges": not misses,
        "range_misses": misses,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--gpus", type=int, help="N (default: every GPU nvidia-smi lists)")
    parser.add_argument(
        "--phases", default="local-1,local-N", help=f"comma-separated, of {', '.join(PHASES)}"
    )
    parser.add_argument(
        "--match", default="[a-g]*", help="kernel files (default: 7 of them, to fit 4 minutes)"
    )
    parser.add_argument("--budget", default="4c", help="per kernel (see cuda-agent suite)")
    parser.add_argument(
        "--deadline", type=float, default=60.0, help="seconds per kernel, everything included"
    )
    parser.add_argument("--limit-s", type=float, default=220.0, help="all phases together stop within this")
    args = parser.parse_args()
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    if bad := [p for p in phases if p not in PHASES]:
        parser.error(f"unknown phase {bad[0]}; use {', '.join(PHASES)}")
    args.out.mkdir(parents=True, exist_ok=True)
    info = host(0)
    n = args.gpus or max(1, len(info["gpus_listed"]))
    info["gpus_used"] = n
    emit(args.out, info)
    deadline = time.monotonic() + args.limit_s
    for i, phase in enumerate(phases):
        share = (deadline - time.monotonic()) / (len(phases) - i)
        if phase.startswith("ray") and not info["ray"][:1].isdigit():
            emit(args.out, {"event": "phase", "phase": phase, "skipped": f"ray {info['ray']}"})
            continue
        emit(args.out, run_phase(phase, n, args, args.out, max(share, 10.0)))
    for one, many in PAIRS:
        if (record := compare(args.out, one, many)) is not None:
            emit(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
