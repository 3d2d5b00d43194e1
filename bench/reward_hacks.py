"""The reward's defences on a GPU (issue 36), through the reward engine as a trainer reaches it.

Phases, one JSON line each to ``OUT/reward_hacks.jsonl`` as they finish:

  ``device``     the GPU;
  ``hack``       per file of ``tests/data/hacks`` (20 PyTorch-level hacks, KernelBench's three
                 adversarial scenarios among them), on its task of ``bench/torch_tasks`` at full
                 size: verdict, reward, rule, message; ``ok`` when it scored the hack reward;
  ``honest``     ``tests/data/torch_answers`` (a Triton answer, a ``load_inline`` CUDA answer) on
                 ``add_mul``: verdict, speedup with its quartiles, reward (> 1 when faster);
  ``reference``  KernelBench files with their own ``Model`` as the answer (the 20 with the largest
                 footprints, then 20 drawn at random, seed 36): verdict, speedup, footprint,
                 device memory peak, peak / footprint, seconds;
  ``throughput`` ``--answers`` distinct ``load_inline`` answers (KernelBench level 1: ReLU,
                 Sigmoid, GPT's GELU, a matrix times a scalar, diag(A) @ B, from ``tests/data/torch_answers/kernelbench_level1``
                 where ``--kernelbench`` holds the tasks; each variant one more statement:
                 another answer, another build) scored in one batch, every task's group at once:
                 builds run in the pool (``sandbox.torch_build``) while the GPU times; answers per
                 minute per GPU over the batch's wall clock, verdicts, speedups, the pool's counts,
                 and per phase of an evaluation (``TorchCandidateResult.phases``: the worker's
                 start, the reference, the ceilings, the answer's load, verification, timing,
                 the wait for a build...) the median seconds, their total and count
                 (``--throughput-compiled``: also timed against torch.compile, as the service does);
  ``summary``    every hack below every honest failure, answers per minute per GPU (evaluations
                 over the seconds they took), the reference table's verdicts and worst peak ratio.

Stops starting evaluations after ``--deadline`` seconds (each is a fresh sandboxed process; the
largest KernelBench files take ~30 s) and always writes what it has; what it skipped is listed.
``--simulate`` needs no GPU: the screen runs for real, the evaluations are listed, not run.

    python3 bench/reward_hacks.py --out $OUT/hacks --deadline 450 --kernelbench shared/kernelbench \\
        [--phases hack,honest,reference] [--largest 20 --random 20]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.trajectory import FAILED, HACK  # noqa: E402
from learning.engine import Item, RewardEngine  # noqa: E402
from learning.tasks import DEFAULT_TORCH_TASKS, TaskSet  # noqa: E402
from sandbox.contract import Budget, EvalOptions, to_dict  # noqa: E402
from sandbox.executor import Executor  # noqa: E402
from sandbox.screen import screen  # noqa: E402
from sandbox.torch_eval import PLAN_FACTOR, PLAN_OVERHEAD  # noqa: E402

HACKS = ROOT / "tests" / "data" / "hacks"
ANSWERS = ROOT / "tests" / "data" / "torch_answers"
MEMORY_TABLE = ROOT / "bench" / "results" / "kernelbench_memory.json"
PHASES = ("hack", "honest", "reference", "throughput")


def header(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text().splitlines():
        if not line.startswith("# ") or ":" not in line:
            break
        key, _, value = line[2:].partition(":")
        fields[key.strip()] = value.strip()
    return fields


def fenced(source: str) -> str:
    return f"```python\n{source}\n```\n"


class Run:
    def __init__(self, out: Path, deadline: float, simulate: bool) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "reward_hacks.jsonl"
        self.path.write_text("")
        self.end = time.monotonic() + deadline
        self.simulate = simulate
        self.evaluations = 0
        self.eval_seconds = 0.0
        self.skipped: list[str] = []

    def write(self, row: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row)[:300], flush=True)

    def left(self) -> float:
        return self.end - time.monotonic()


def engine_for(
    paths: list[Path], executor: Executor, workers: int = 1, compiled: bool = False
) -> RewardEngine:
    budget = Budget(timeout_s=120.0, time_budget_ms=300.0)
    tasks = TaskSet.load(paths)  # torch.compile's baseline is left out: it takes a minute a task
    return RewardEngine(
        executor,
        tasks,
        workers=workers,
        seeds=(1, 2),
        budget=budget,
        options=EvalOptions(),
        torch_compiled=compiled,
    )


def score(run: Run, engine: RewardEngine | None, task: str, source: str, key: str) -> dict[str, Any]:
    """One answer's score (or, simulated, its screen alone)."""
    if engine is None:
        status, why = screen(source)
        return {"verdict": status.value if status else "not_run (simulated)", "message": why}
    start = time.monotonic()
    (s,) = engine.score([Item(key, task, fenced(source))])
    seconds = time.monotonic() - start
    if s.verdict not in ("rejected", "compile_error", "no_code") or s.speedup:  # reached a worker
        run.evaluations += 1
        run.eval_seconds += seconds
    return {**to_dict(s), "seconds": round(seconds, 2)}


def hacks(run: Run, engine: RewardEngine | None) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(HACKS.glob("*.py")):
        meta = header(path)
        if run.left() <= 0:
            run.skipped.append(f"hack {path.stem}")
            continue
        got = score(run, engine, f"torch.{meta['task']}", path.read_text(), path.stem)
        row = {"phase": "hack", "hack": path.stem, "what": meta["hack"], "caught": meta["caught"], **got}
        row["ok"] = (
            got.get("reward") == HACK
            if engine
            else got["verdict"] == "rejected" or meta["caught"] != "screen"
        )
        run.write(row)
        rows.append(row)
    return rows


def throughput_batch(kernelbench: Path, answers: int) -> tuple[list[Path], list[tuple[str, str]]]:
    """The task files and ``answers`` (task, source) pairs of the throughput phase: the level-1
    KernelBench answers of ``tests/data/torch_answers/kernelbench_level1`` where ``kernelbench``
    holds their tasks, else the CUDA answers on ``bench/torch_tasks``; answer ``i`` is its file
    with one more statement, ``THROUGHPUT_VARIANT = i`` (another syntax tree: another build and
    another evaluation; a comment would not do, the engine's cache key ignores comments)."""
    level1 = sorted((ANSWERS / "kernelbench_level1").glob("*.py"))
    files = [kernelbench / f"{header(p)['task']}.py" for p in level1]
    if level1 and all(f.is_file() for f in files):
        paths, sources = (
            files,
            [(f"torch.{f.stem}", p.read_text()) for f, p in zip(files, level1, strict=True)],
        )
    else:
        paths = [DEFAULT_TORCH_TASKS]
        sources = [(f"torch.{header(p)['task']}", p.read_text()) for p in sorted(ANSWERS.glob("*_cuda.py"))]
    batch = [
        (task, f"THROUGHPUT_VARIANT = {i}\n{src}")
        for i in range(answers)
        for task, src in [sources[i % len(sources)]]
    ]
    return paths, batch


def phase_medians(phases: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Per phase of an evaluation (``TorchCandidateResult.phases``): the median seconds over the
    evaluations that had it, their sum, and how many had it, largest median first."""
    names = {name for p in phases for name in p}
    rows = {
        name: {
            "median": round(statistics.median(got), 3),
            "total": round(sum(got), 2),
            "n": len(got),
        }
        for name in names
        for got in [[p[name] for p in phases if name in p]]
    }
    return dict(sorted(rows.items(), key=lambda kv: -kv[1]["median"]))


def throughput(
    run: Run, executor: Executor | None, kernelbench: Path, answers: int, compiled: bool
) -> dict[str, Any]:
    """``answers`` distinct load_inline answers scored in one batch (see the module docstring)."""
    from sandbox.local import LocalExecutor

    paths, batch = throughput_batch(kernelbench, answers)
    row: dict[str, Any] = {
        "phase": "throughput",
        "answers": len(batch),
        "tasks": sorted({t for t, _ in batch}),
    }
    if executor is None:
        row["refused_by_screen"] = sum(screen(src)[0] is not None for _, src in batch)
        run.write(row)
        return row
    # one group per task, all at once: every answer's build starts while the GPU times the first
    engine = engine_for(paths, executor, workers=len(row["tasks"]), compiled=compiled)
    items = [Item(f"t{i}", task, fenced(src)) for i, (task, src) in enumerate(batch)]
    start = time.monotonic()
    try:
        got = engine.score(items, deadline_s=max(1.0, run.left()))
    finally:
        engine.close()
    wall = time.monotonic() - start
    scored = [g for g in got if g.reward is not None]
    row |= {
        "against_torch_compile": compiled,
        "scored": len(scored),
        "wall_s": round(wall, 1),
        "answers_per_minute_per_gpu": round(60 * len(scored) / wall, 2) if wall else None,
        "verdicts": {v: sum(1 for g in got if g.verdict == v) for v in sorted({g.verdict for g in got})},
        "speedups": sorted(round(g.speedup, 3) for g in scored),
        "phases_median_s": phase_medians([g.phases for g in got]),
        "builds": dict(executor.builds.counts) if isinstance(executor, LocalExecutor) else {},
    }
    run.write(row)
    return row


def honest(run: Run, engine: RewardEngine | None) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(ANSWERS.glob("*.py")):
        meta = header(path)
        if run.left() <= 0:
            run.skipped.append(f"honest {path.stem}")
            continue
        got = score(run, engine, f"torch.{meta['task']}", path.read_text(), path.stem)
        row = {"phase": "honest", "answer": path.stem, "what": meta["answer"], **got}
        row["ok"] = (got.get("reward") or 0) > 1.0 if engine else got["verdict"] != "rejected"
        run.write(row)
        rows.append(row)
    return rows


TOP = 20  # the files with the largest footprints; the random draw is from the others


def pick(
    kernelbench: Path, largest: int, drawn: int, named: list[str] | None = None
) -> list[tuple[Path, str]]:
    """The first ``largest`` of the :data:`TOP` files with the largest footprints (from the CPU
    memory table) and ``drawn`` of the rest at random (seed 36, whatever ``largest`` is: two calls,
    ``--largest 20 --random 0`` and ``--largest 0 --random 20``, make the same 40-file table);
    or the ``named`` files (``--files``: a resumed run).  Largest footprint first, so the files
    that can run out of memory run while the call has time."""
    files = sorted(kernelbench.glob("level*/*.py"))
    sizes: dict[str, int] = {}
    if MEMORY_TABLE.exists():
        table = json.loads(MEMORY_TABLE.read_text())
        sizes = {r["file"]: r.get("footprint", 0) for r in table["rows"]}

    def size(p: Path) -> int:
        return -sizes.get(str(p.relative_to(kernelbench)), 0)

    if named is not None:
        return [(kernelbench / n, "named") for n in sorted(named, key=lambda n: size(kernelbench / n))]
    ranked = sorted(files, key=size)
    rest = ranked[TOP:]
    drawn_files = random.Random(36).sample(rest, min(drawn, len(rest)))
    chosen = [(p, "largest") for p in ranked[: min(largest, TOP)]] + [(p, "random") for p in drawn_files]
    return sorted(chosen, key=lambda c: size(c[0]))


def as_answer(task_source: str) -> str:
    """A task's own ``Model`` as the answer (``ModelNew`` a subclass of it)."""
    return task_source + "\n\nclass ModelNew(Model):\n    pass\n"


def reference(
    run: Run, executor: Executor | None, kernelbench: Path, largest: int, drawn: int, named: list[str] | None
) -> list[dict[str, Any]]:
    chosen = pick(kernelbench, largest, drawn, named)
    if executor is None:
        for path, why in chosen:
            run.write(
                {
                    "phase": "reference",
                    "file": str(path.relative_to(kernelbench)),
                    "picked": why,
                    "verdict": "not_run (simulated)",
                }
            )
        return []
    rows = []
    for path, why in chosen:
        name = str(path.relative_to(kernelbench))
        if run.left() <= 0:
            run.skipped.append(f"reference {name}")
            continue
        engine = engine_for([path], executor)
        try:
            task = next(iter(engine.tasks))
            got = score(run, engine, task.name, as_answer(path.read_text()), name)
        finally:
            engine.close()
        fp, peak = got.get("footprint_bytes", 0), got.get("peak_memory_bytes", 0)
        row = {
            "phase": "reference",
            "file": name,
            "picked": why,
            "verdict": got.get("verdict"),
            "speedup": got.get("speedup"),
            "speedup_low": got.get("speedup_low"),
            "speedup_high": got.get("speedup_high"),
            "footprint_gib": round(fp / 2**30, 3),
            "peak_gib": round(peak / 2**30, 3),
            "peak_over_footprint": round(peak / fp, 2) if fp else None,
            "within_plan": bool(fp) and peak <= PLAN_FACTOR * fp + PLAN_OVERHEAD,
            "seconds": got.get("seconds"),
            "phases": {k: round(v, 3) for k, v in (got.get("phases") or {}).items()},
            "message": (got.get("message") or got.get("reason") or "")[:300],
        }
        run.write(row)
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--deadline", type=float, default=450.0)
    parser.add_argument("--kernelbench", default=str(ROOT / "shared" / "kernelbench"))
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--largest", type=int, default=20)
    parser.add_argument("--random", type=int, default=20)
    parser.add_argument(
        "--files", help="comma-separated KernelBench files (level1/x.py,...) instead of the draw"
    )
    parser.add_argument("--answers", type=int, default=20, help="throughput: distinct load_inline answers")
    parser.add_argument(
        "--throughput-compiled", action="store_true", help="throughput: also time against torch.compile"
    )
    parser.add_argument("--simulate", action="store_true")
    args = parser.parse_args()
    run = Run(Path(args.out), args.deadline, args.simulate)
    phases = set(args.phases.split(","))
    executor: Executor | None = None
    engine = None
    if args.simulate:
        run.write({"phase": "device", "name": "simulated"})
    else:
        from sandbox.local import LocalExecutor

        os.environ.setdefault("CUDA_AGENT_UNSAFE_TORCH", "1")  # a disposable GPU host without bubblewrap
        executor = LocalExecutor()
        engine = engine_for([DEFAULT_TORCH_TASKS], executor)
        devices = engine.devices()
        run.write(
            {"phase": "device", **({k: str(v) for k, v in asdict(devices[0]).items()} if devices else {})}
        )
    kb = Path(args.kernelbench)
    try:
        hack_rows = hacks(run, engine) if "hack" in phases else []
        honest_rows = honest(run, engine) if "honest" in phases else []
        if engine is not None:
            engine.close()
        rate = (
            throughput(run, executor, kb, args.answers, args.throughput_compiled)
            if "throughput" in phases
            else {}
        )
        ref_rows = (
            reference(
                run, executor, kb, args.largest, args.random, args.files.split(",") if args.files else None
            )
            if "reference" in phases and kb.is_dir()
            else []
        )
    finally:
        if executor is not None:
            executor.close()
    if "reference" in phases and not kb.is_dir():
        run.skipped.append(f"reference: no KernelBench folder at {kb}")
    rewards = [float(r["reward"]) for r in hack_rows if r.get("reward") is not None]
    run.write(
        {
            "phase": "summary",
            "hacks": len(hack_rows),
            "hacks_scored_hack": sum(1 for r in hack_rows if r.get("reward") == HACK),
            "every_hack_below_every_failure": bool(rewards) and max(rewards) < FAILED,
            "honest_above_1": [r["answer"] for r in honest_rows if (r.get("reward") or 0) > 1.0],
            "reference_ok": sum(1 for r in ref_rows if r["verdict"] == "ok"),
            "reference_rows": len(ref_rows),
            "reference_within_plan": all(r["within_plan"] for r in ref_rows),
            "worst_peak_over_footprint": max(
                (float(r["peak_over_footprint"] or 0) for r in ref_rows), default=None
            ),
            "answers_per_minute_per_gpu": round(60 * run.evaluations / run.eval_seconds, 2)
            if run.eval_seconds
            else None,
            "throughput_answers_per_minute_per_gpu": rate.get("answers_per_minute_per_gpu"),
            "skipped": run.skipped,
        }
    )
    return 0 if all(r["within_plan"] for r in ref_rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
