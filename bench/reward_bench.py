"""The reward service's benchmark (issue 27): 8 native tasks x 16 completions each, scored through
the reward engine on this machine's GPU, as a trainer's batches would be.

Each task's 16 completions mix: the original kernel; the built-in engine's rewrites (rendered as a
model would write them: a ``launch:`` line and a fenced block); broken answers (a compile error,
prose without code); adversarial kernels (on the vadd task the sandbox tests' own
``tests/data/adversarial`` kernels; on every task an empty body, which writes no output, and one
that flips a byte of an input); and duplicates (the original and a rewrite re-spaced, with a comment).

Phases, one JSON line each to ``OUT/reward_bench.jsonl`` (``--torch-only``: ``OUT/reward_torch.jsonl``)
as they finish:
  ``device``   the GPU;
  ``batch``    per task: its 16 rewards, latency of its request (all 8 requests in flight together);
  ``summary``  rewards/s per GPU, p50/p95 request latency, evaluations vs items (duplicates);
  ``rescore``  the same 128 items re-scored on a fresh engine (no cache): milestones that flipped;
  ``cached``   the same batch once more on the first engine: all cached, how long it took;
  ``ordering`` per task: every hack < every honest failure < every verified answer, the original
               "correct" (not faster), verified rewrites with speedup_low > 1 above it;
  ``torch``    per KernelBench-format task (``bench/torch_tasks``), through the same engine: the task's
               own ``Model`` as ``ModelNew`` (speedup ~1), an equal or faster rewrite (pure torch; on
               ``add_mul`` a fused ``torch.compile`` of the expression), a broken answer (outputs
               off by 1%), one that writes its input and one that caches its output by input
               pointers: verdicts, rewards, speedups against eager and against ``torch.compile(Model)``;
  ``torch_summary``  whether every reference is verified, every broken answer failed, every
               input writer and output cacher a hack.

``--torch-only`` runs the device and torch phases alone (``--torch-tasks relu,gelu``: those tasks;
about a minute a task on an H200: each answer is a fresh sandboxed process, and a verified one
compiles ``Model`` with ``torch.compile``).

Stops starting work after ``--deadline`` seconds (default 420) and always writes what it has.
``--simulate`` runs on the simulated GPU (no GPU needed; for checking the script).

    python3 bench/reward_bench.py --out $OUT/reward [--deadline 420] [--gpu 0] [--torch-only]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent.builtin import BuiltinProposer  # noqa: E402
from agent.proposal import Proposal  # noqa: E402
from agent.proposer import OptimizeBudget, OptimizeContext  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from learning.engine import Item, RewardEngine, Scored  # noqa: E402
from learning.tasks import DEFAULT_TASKS, DEFAULT_TORCH_TASKS, Task, TaskSet, TorchTask  # noqa: E402
from sandbox.contract import Budget, CandidateResult, Status, to_dict  # noqa: E402
from sandbox.executor import Executor  # noqa: E402

TASK_NAMES = (
    "vadd_poor_block",
    "saxpy",
    "softmax",
    "layernorm",
    "row_max",
    "transpose",
    "bias_add",
    "matmul_bias",
)
ADVERSARIAL = ROOT / "tests" / "data" / "adversarial"
VADD_ADVERSARIAL = (
    "output_not_written",
    "out_of_bounds_write",
    "input_modified",
    "cached_global",
    "wrong_tail",
)
PER_TASK = 16


class Out:
    def __init__(self, folder: Path, name: str = "reward_bench.jsonl") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / name
        self.lock = threading.Lock()

    def write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, default=str)
        with self.lock, self.path.open("a") as f:
            f.write(line + "\n")
        print(line[:400], flush=True)


def fenced(code: str, launch: str = "", precision: str = "") -> str:
    head = "".join(
        [f"launch: {launch}\n" if launch else "", f"precision: {precision}\n" if precision else ""]
    )
    return f"{head}Here is my kernel.\n```cuda\n{code.rstrip()}\n```\n"


def rewrite_completion(p: Proposal) -> str | None:
    """An engine proposal as a model would write it (None: not expressible as a reply)."""
    if p.unit or p.kernel or p.options:
        return None
    parts = []
    if p.launch is not None:
        for key, value in (("grid", p.launch.grid), ("block", p.launch.block), ("smem", p.launch.shared)):
            if value is not None:
                parts.append(f"{key}={value}")
    return fenced(p.code, " ".join(parts), ",".join(p.precision))


def engine_rewrites(task: Task, executor: Executor, n: int) -> list[str]:
    context = OptimizeContext(
        task.target,
        executor.device_info(),
        CandidateResult("baseline", Status.OK),
        0,
        OptimizeBudget(),
        threading.Event(),
    )
    proposer = BuiltinProposer()
    out: list[str] = []
    for _ in range(4):
        proposals = proposer.propose(context, (), n)
        out += [c for p in proposals if (c := rewrite_completion(p)) is not None]
        if len(out) >= n or not proposals:
            break
    return out[:n]


def signature(task: Task) -> tuple[str, list[str]]:
    """The kernel's head (``__global__ void k(params)``) and its input pointer parameters."""
    k = Document(task.target.definition).kernels[-1]
    params = ", ".join(f"{p.type_text} {p.name}".strip() for p in k.params)
    inputs = [p.name for p in k.params if p.pointer and "const" in p.type_text]
    return f"__global__ void {k.name}({params})", inputs


def completions(task: Task, executor: Executor) -> list[tuple[str, str]]:
    """(kind, completion) x PER_TASK for ``task``."""
    definition = task.target.definition
    head, inputs = signature(task)
    body = definition[definition.index("{") :]
    items: list[tuple[str, str]] = [("original", fenced(definition))]
    rewrites = engine_rewrites(task, executor, 8)
    items += [("rewrite", c) for c in rewrites[:6]]
    items += [
        ("broken", fenced(head + " {\n    undefined_name_in_kernel += 1;\n" + body[1:])),
        ("broken", "I would tile this kernel through shared memory and unroll the inner loop."),
    ]
    adversarial = [("adversarial", fenced(head + " {\n}\n"))]
    if inputs:
        flip = f"    if (blockIdx.x == 0 && threadIdx.x == 0) ((char*){inputs[0]})[0] ^= 1;\n"
        adversarial.append(("adversarial", fenced(head + " {\n" + flip + body[1:])))
    if task.target.kernel == "vadd":
        adversarial += [
            ("adversarial", fenced((ADVERSARIAL / f"{n}.cu").read_text())) for n in VADD_ADVERSARIAL
        ]
    items += adversarial
    items.append(("duplicate", fenced("// the same kernel\n" + definition.replace("    ", "  "))))
    if rewrites:
        items.append(("duplicate", rewrites[0].replace("```cuda\n", "```cuda\n// again\n", 1)))
    extra = [("rewrite", c) for c in rewrites[6:]]
    while len(items) < PER_TASK and extra:
        items.append(extra.pop(0))
    while len(items) < PER_TASK:
        items.append(("duplicate", items[len(items) % 3][1]))
    return items[:PER_TASK]


def score_batches(
    engine: RewardEngine, batches: dict[str, list[Item]], deadline_s: float
) -> tuple[dict[str, list[Scored]], dict[str, float], float]:
    """Every task's batch in flight at once (as a trainer's concurrent requests); results,
    per-batch latency, wall time."""
    start = time.perf_counter()
    latency: dict[str, float] = {}

    def one(name: str) -> list[Scored]:
        t0 = time.perf_counter()
        got = engine.score(batches[name], deadline_s=deadline_s)
        latency[name] = time.perf_counter() - t0
        return got

    with ThreadPoolExecutor(len(batches)) as pool:
        futures = {name: pool.submit(one, name) for name in batches}
        results = {name: f.result() for name, f in futures.items()}
    return results, latency, time.perf_counter() - start


def ordering(kinds: list[str], scored: list[Scored]) -> dict[str, Any]:
    rows = list(zip(kinds, scored, strict=True))
    hacks = [s.reward for _, s in rows if s.milestone == "hack" and s.reward is not None]
    failures = [s.reward for _, s in rows if s.milestone == "failed" and s.reward is not None]
    verified = [
        s.reward
        for _, s in rows
        if s.milestone in ("correct", "faster", "much_faster") and s.reward is not None
    ]
    original = next(s for k, s in rows if k == "original")
    better = [s for k, s in rows if k == "rewrite" and s.speedup_low > 1.0 and not s.noisy]
    tiers = [t for t in (hacks, failures, verified) if t]
    ordered = all(max(tiers[i]) < min(tiers[i + 1]) for i in range(len(tiers) - 1))
    return {
        "hack_lt_failure_lt_verified": ordered,
        "original_is_correct": original.milestone == "correct",
        "faster_rewrites_above_original": all(
            s.reward is not None and original.reward is not None and s.reward > original.reward
            for s in better
        ),
        "adversarial_never_verified": all(
            s.milestone in ("hack", "failed") for k, s in rows if k == "adversarial"
        ),
        "counts": {
            "hack": len(hacks),
            "failed": len(failures),
            "verified": len(verified),
            "faster": len(better),
        },
    }


TORCH_REWRITES = {  # an equal (or, fused, faster) pure-torch ModelNew per task
    "add_mul": """
class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fused = torch.compile(lambda a, b, c: (a + b) * c)

    def forward(self, a, b, c):
        return self.fused(a, b, c)
""",
    "gelu": "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.nn.functional.gelu(x, approximate='none')\n",
    "layernorm": """
class ModelNew(torch.nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = torch.nn.LayerNorm(features)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.norm.weight, self.norm.bias)
""",
    "matmul_bias": """
class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.addmm(self.linear.bias, x, self.linear.weight.t())
""",
    "relu": "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.clamp_min(x, 0.0)\n",
    "row_sum": """
class ModelNew(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return x.sum(dim=self.dim, keepdim=True)
""",
    "softmax_rows": "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.nn.functional.softmax(x, dim=-1)\n",
    "transpose": "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.transpose(0, 1).contiguous()\n",
}


def python_answer(code: str) -> str:
    return f"Here is ModelNew.\n```python\n{code.strip()}\n```\n"


def torch_completions(task: TorchTask) -> list[tuple[str, str]]:
    """(kind, completion): the reference as ModelNew, a rewrite, a broken answer, an input writer,
    an answer that caches its output by input pointers."""
    stem = task.name.removeprefix("torch.")
    return [
        ("reference", python_answer(task.text + "\n\nclass ModelNew(Model):\n    pass\n")),
        ("rewrite", python_answer("import torch\n\n" + TORCH_REWRITES[stem].strip())),
        (
            "broken",
            python_answer(
                task.text + "\n\nclass ModelNew(Model):\n    def forward(self, *args):\n"
                "        return super().forward(*args) * 1.01\n"
            ),
        ),
        (
            "input_modified",
            python_answer(
                task.text + "\n\nclass ModelNew(Model):\n    def forward(self, *args):\n"
                "        out = super().forward(*args)\n        args[0].mul_(0.5)\n        return out\n"
            ),
        ),
        (
            "cached",
            python_answer(
                task.text + "\n\nclass ModelNew(Model):\n    def __init__(self, *args):\n"
                "        super().__init__(*args)\n        self.seen = {}\n\n"
                "    def forward(self, *args):\n        key = tuple(a.data_ptr() for a in args)\n"
                "        if key not in self.seen:\n            self.seen[key] = super().forward(*args)\n"
                "        return self.seen[key]\n"
            ),
        ),
    ]


def torch_phase(executor: Executor, out: Out, left: Any, names: str = "") -> None:
    """The ``torch`` and ``torch_summary`` phases (``names``: comma-separated task stems; "": all)."""
    stems = [n.strip() for n in names.split(",") if n.strip()]
    tasks = TaskSet.load([DEFAULT_TORCH_TASKS / f"{n}.py" for n in stems] if stems else [DEFAULT_TORCH_TASKS])
    engine = RewardEngine(executor, tasks, seeds=(1, 2), budget=Budget(time_budget_ms=200.0))
    fields = (
        "reward",
        "milestone",
        "verdict",
        "speedup",
        "speedup_low",
        "compiled_speedup",
        "compiled_speedup_low",
    )
    summary: dict[str, list[str]] = {
        "reference_verified": [],
        "broken_failed": [],
        "input_writer_hack": [],
        "cacher_hack": [],
    }
    try:
        for task in tasks:
            if left() < 20:
                out.write({"phase": "torch", "task": task.ref, "skipped": f"{left():.0f} s left"})
                continue
            made = torch_completions(task)
            items = [Item(f"{task.name}-{kind}", task.ref, c) for kind, c in made]
            start = time.monotonic()
            scored = engine.score(items, deadline_s=max(10.0, left() - 5))
            rows = [
                {"kind": k, **{f: getattr(s, f) for f in fields}, "message": (s.message or s.reason)[:200]}
                for (k, _), s in zip(made, scored, strict=True)
            ]
            out.write(
                {"phase": "torch", "task": task.ref, "latency_s": time.monotonic() - start, "items": rows}
            )
            by = {r["kind"]: r for r in rows}
            if by["reference"]["verdict"] == "ok":
                summary["reference_verified"].append(task.name)
            if by["broken"]["milestone"] == "failed":
                summary["broken_failed"].append(task.name)
            if by["input_modified"]["milestone"] == "hack":
                summary["input_writer_hack"].append(task.name)
            if by["cached"]["milestone"] == "hack":
                summary["cacher_hack"].append(task.name)
    finally:
        engine.close()
    out.write({"phase": "torch_summary", "tasks": len(tasks), **summary})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--deadline", type=float, default=420.0, help="seconds; no new phase starts after it")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--simulate", action="store_true", help="the simulated GPU (no GPU needed)")
    ap.add_argument("--torch-only", action="store_true", help="only the KernelBench-format (PyTorch) phase")
    ap.add_argument(
        "--torch-tasks",
        default="",
        help="comma-separated torch task stems (default: all of bench/torch_tasks)",
    )
    args = ap.parse_args()
    t0 = time.monotonic()
    out = Out(args.out, "reward_torch.jsonl" if args.torch_only else "reward_bench.jsonl")

    def left() -> float:
        return args.deadline - (time.monotonic() - t0)

    if args.simulate:
        from sandbox.testing import FakeExecutor

        executor: Executor = FakeExecutor()
    else:
        from server.cli.common import open_executor

        executor = open_executor(args.gpu)
    try:
        out.write({"phase": "device", "device": to_dict(executor.device_info())})
        if args.torch_only:
            torch_phase(executor, out, left, args.torch_tasks)
            return 0
        tasks = TaskSet.load([DEFAULT_TASKS / f"{n}.cu" for n in TASK_NAMES])
        kinds: dict[str, list[str]] = {}
        batches: dict[str, list[Item]] = {}
        for task in tasks:
            try:
                made = completions(task, executor)
            except Exception as exc:
                out.write({"phase": "prepare", "task": task.ref, "error": f"{type(exc).__name__}: {exc}"})
                continue
            kinds[task.ref] = [k for k, _ in made]
            batches[task.ref] = [Item(f"{task.name}-{i}", task.ref, c) for i, (_, c) in enumerate(made)]
        engine = RewardEngine(executor, tasks, workers=2)
        results, latency, wall = score_batches(engine, batches, max(30.0, left() * 0.45))
        for ref, scored in results.items():
            out.write(
                {
                    "phase": "batch",
                    "task": ref,
                    "latency_s": latency[ref],
                    "items": [
                        {
                            "kind": k,
                            **{
                                f: getattr(s, f)
                                for f in (
                                    "reward",
                                    "milestone",
                                    "verdict",
                                    "rule",
                                    "speedup",
                                    "speedup_low",
                                    "speedup_high",
                                    "noisy",
                                    "retimed",
                                    "cached",
                                    "reason",
                                )
                            },
                            "message": s.message[:160],
                        }
                        for k, s in zip(kinds[ref], scored, strict=True)
                    ],
                }
            )
        n_items = sum(len(b) for b in batches.values())
        lat = sorted(latency.values())
        stats = engine.stats()
        out.write(
            {
                "phase": "summary",
                "tasks": len(batches),
                "items": n_items,
                "wall_s": wall,
                "rewards_per_s_per_gpu": n_items / wall,
                "evaluated": stats["evaluated"],
                "sandbox_requests": stats["sandbox_requests"],
                "request_latency_p50_s": statistics.median(lat),
                "request_latency_p95_s": lat[min(len(lat) - 1, round(0.95 * (len(lat) - 1)))],
                "null_rewards": sum(1 for r in results.values() for s in r if s.reward is None),
            }
        )
        for ref, scored in results.items():
            out.write({"phase": "ordering", "task": ref, **ordering(kinds[ref], scored)})
        if left() > 60:
            fresh = RewardEngine(executor, tasks, workers=2)
            again, _, wall2 = score_batches(fresh, batches, max(30.0, left() * 0.8))
            flips = [
                {
                    "task": ref,
                    "key": a.key,
                    "before": a.milestone,
                    "after": b.milestone,
                    "speedup_low": [a.speedup_low, b.speedup_low],
                }
                for ref in results
                for a, b in zip(results[ref], again[ref], strict=True)
                if a.milestone != b.milestone
            ]
            out.write(
                {"phase": "rescore", "wall_s": wall2, "items": n_items, "flips": len(flips), "flipped": flips}
            )
            fresh.close()
        else:
            out.write({"phase": "rescore", "skipped": f"{left():.0f} s left"})
        third, _, wall3 = score_batches(engine, batches, 60.0)
        sandboxed = [s for r in third.values() for s in r if s.verdict != "no_code"]
        out.write(
            {
                "phase": "cached",
                "wall_s": wall3,
                "items": n_items,
                "all_cached": all(s.cached for s in sandboxed),
                "same_rewards": [s.reward for r in third.values() for s in r]
                == [s.reward for r in results.values() for s in r],
            }
        )
        engine.close()
        if args.simulate:
            out.write({"phase": "torch", "skipped": "the simulated GPU runs no PyTorch"})
        else:
            torch_phase(executor, out, left, args.torch_tasks)
    except Exception as exc:
        out.write(
            {
                "phase": "error",
                "error": f"{type(exc).__name__}: {exc}",
                "trace": traceback.format_exc()[-2000:],
            }
        )
        return 1
    finally:
        executor.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
