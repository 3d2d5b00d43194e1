"""Trajectories: every attempt of every optimize run as one JSON line, usable as an RL or
fine-tuning dataset.

Each line is one attempt, self-contained (schema ``cuda-agent.trajectory/1``)::

    {
      "schema": "cuda-agent.trajectory/1",
      "run_id": "3f9c0a1b2c4d",          # one optimize run
      "time": "2026-12-02T10:41:07Z",    # when the verdict came back (UTC)
      "file": "bench/kernels/vadd.cu", "kernel": "vadd",
      "proposer": "llm:Qwen/Qwen2.5-Coder-7B-Instruct", "seed": 0, "device": "NVIDIA H200",
      "original": "__global__ void vadd(...) {...}",   # the kernel definition being rewritten
      "spec": "// @cuda-agent ...",                      # its spec as written
      "baseline_ms": 0.081,
      "step": 7, "batch": 1, "candidate_id": "b1-c3",   # evaluation order within the run
      "proposal": {
        "code": "...",                  # replaces the original definition
        "description": "...", "assumptions": ["a and c never alias"],
        "launch": {"grid": "cdiv(n, block*4)", "block": null, "shared": null} | null,
        "kernel": null,                 # a new name expression, if any
        "transcript": [{"role": "system", "content": "..."}, ...]   # LLM proposals only
      },
      "result": { ... },                # sandbox.contract.CandidateResult as JSON (status, checks, timing...)
      "reward": 2.17,                   # reward(result); null when the evaluation was cancelled
      "duplicate_of": ""                # candidate id whose verdict an identical proposal reused
    }

Reward (:func:`reward`), with milestones like the seed system's — wrong < correct < faster than
the original < much faster — plus a bounded shaping term inside each milestone::

    status is not ok (compile error, crash, mismatch, rejected, ...)    -1
    ok, not reliably faster (speedup_low <= 1)                           1 + s
    ok, reliably faster (speedup_low > 1)                                2 + s
    ok, much faster (speedup_low > 1 and speedup >= 1.5)                 3 + s
    where s = 0.5 * clamp(log2(speedup), -1, 2)   (so s is in [-0.5, 1])

``speedup`` is the baseline's median time over the candidate's (timed interleaved with the
baseline); ``speedup_low`` the pessimistic ratio of quartiles.  A candidate that is verified but
untimed (``time`` off) counts as correct with s = 0.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sandbox.contract import CandidateResult, Status, to_dict

if TYPE_CHECKING:
    from agent.loop import Attempt

SCHEMA = "cuda-agent.trajectory/1"
DEFAULT_FILE = "cuda-agent/trajectories.jsonl"  # under $XDG_DATA_HOME (default ~/.local/share)
MUCH_FASTER = 1.5  # speedup of the "much faster" milestone (as KernelBench's fast_1.5)
FAILED, CORRECT, FASTER, MUCH = -1.0, 1.0, 2.0, 3.0


def reward(result: CandidateResult) -> float:
    """The documented reward of one verdict (see the module docstring)."""
    if result.status is not Status.OK:
        return FAILED
    if result.speedup <= 0:  # verified, not timed
        return CORRECT
    shaping = 0.5 * min(2.0, max(-1.0, math.log2(result.speedup)))
    if result.speedup_low <= 1.0:
        return CORRECT + shaping
    return (MUCH if result.speedup >= MUCH_FASTER else FASTER) + shaping


@dataclass(frozen=True)
class RunInfo:
    """What every line of one run shares."""

    run_id: str
    file: str
    kernel: str
    proposer: str
    seed: int
    device: str
    original: str
    spec: str
    baseline_ms: float


def default_path() -> Path:
    """Where ``cuda-agent optimize`` appends trajectories unless told otherwise."""
    root = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(root) / DEFAULT_FILE


class TrajectoryLog:
    """Appends attempts to a JSONL file (created with its folders); thread-safe, flushed per line."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def record(self, run: RunInfo, attempt: Attempt) -> None:
        p = attempt.proposal
        line = {
            "schema": SCHEMA,
            "run_id": run.run_id,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "file": run.file,
            "kernel": run.kernel,
            "proposer": run.proposer,
            "seed": run.seed,
            "device": run.device,
            "original": run.original,
            "spec": run.spec,
            "baseline_ms": run.baseline_ms,
            "step": attempt.index,
            "batch": attempt.batch,
            "candidate_id": attempt.candidate_id,
            "proposal": {
                "code": p.code,
                "description": p.description,
                "assumptions": list(p.assumptions),
                "launch": to_dict(p.launch) if p.launch else None,
                "kernel": p.kernel,
                "transcript": [{"role": r, "content": c} for r, c in p.transcript],
            },
            "result": to_dict(attempt.result),
            "reward": attempt.reward,
            "duplicate_of": attempt.duplicate_of,
        }
        text = json.dumps(line, separators=(",", ":")) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(text)
