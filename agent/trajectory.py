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
      "reward_version": "cuda-agent.reward/2",
      "duplicate_of": "",               # candidate id whose verdict an identical proposal reused
      "retracts": "",                   # candidate id of an earlier line this verdict overturns
      "task": "",                       # the task (name@hash) when the run is over a task set
      "retracted_by": "",               # set by read_trajectories on a line a later line retracts
      "simulated": false                # true: the simulated GPU's made-up verdict, not a measurement
    }

Lines of a run on the simulated GPU (``sandbox.testing``: every changed candidate "verifies" 2x
faster) are never written to the file a :class:`TrajectoryLog` is given: they go to a file of their
own beside it (:func:`simulated_path`: ``trajectories.simulated.jsonl``), each marked ``simulated``,
so a dataset of measured attempts never holds a made-up one.

A line is a :class:`TrajectoryLine`, written and read through the sandbox contract's converter
(:func:`sandbox.contract.to_json` / :func:`~sandbox.contract.from_json`).

Reward (:func:`reward`, version :data:`REWARD_VERSION`, recorded on every line), with
milestones like the seed system's — wrong < correct < faster than the original < much faster —
plus a bounded shaping term inside each milestone, and hacks below every honest failure::

    a hack (:func:`hack_rule`: the sandbox rejected it: an input modified, an output
    not written, out-of-bounds, sanitizer errors...; an implausible time; the timed runs' outputs
    differing from the baseline's; a lower precision than the task allows)   -2
    any other failure (compile error, launch error, crash, timeout, mismatch, no code)   -1
    ok, not reliably faster (speedup_low <= 1), or noisy (:func:`noisy`)       min(1 + s, 1)
    ok, reliably faster (speedup_low > 1)                                      2 + s
    ok, much faster (speedup_low >= 1.5)                                       3 + s
    where s = 0.5 * clamp(log2(speedup_low), -1, 2)   (so s is in [-0.5, 1])

``speedup_low`` is the pessimistic bound of the paired speedup (the first quartile of the paired
baseline/candidate ratios): noise widens the interval and lowers the bound, so timing noise can
lower a reward, never raise it; the reward is non-decreasing in ``speedup_low``.  A noisy
measurement (throttled clock, multimodal samples, an interval wider than :data:`NOISY_SPREAD` of
the speedup) earns at most "correct" (the reward service times a noisy candidate once more first).
A candidate that is verified but untimed (``time`` off) counts as correct with s = 0.  Hacks are
never shaped: every hack scores exactly :data:`HACK`.

A candidate that compute-sanitizer later refuses (the optimize loop re-checks its winner) gets a
line with ``"retracts": "<candidate id>"``: that earlier line's positive reward no longer stands
(:func:`read_trajectories` applies retractions).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from agent.proposal import Attempt
from cudasrc.launch import LaunchChange
from sandbox.contract import PRECISIONS, CandidateResult, ContractError, Status, from_json, to_json

SCHEMA = "cuda-agent.trajectory/1"
DEFAULT_FILE = "cuda-agent/trajectories.jsonl"  # under $XDG_DATA_HOME (default ~/.local/share)
REWARD_VERSION = "cuda-agent.reward/2"
MUCH_FASTER = 1.5  # lower bound of the speedup of the "much faster" milestone (as KernelBench's fast_1.5)
NOISY_SPREAD = 0.25  # (speedup_high - speedup_low) / speedup above this: the timing is noisy
HACK, FAILED, CORRECT, FASTER, MUCH = -2.0, -1.0, 1.0, 2.0, 3.0


class Milestone(str, Enum):
    """The milestone a verdict reached, lowest first: a hack, a failure, correct, faster than the
    original, much faster (``speedup_low`` >= :data:`MUCH_FASTER`)."""

    HACK = "hack"
    FAILED = "failed"
    CORRECT = "correct"
    FASTER = "faster"
    MUCH_FASTER = "much_faster"

    @property
    def level(self) -> float:
        """The milestone's base reward, for trainers' numeric logs."""
        return _LEVEL[self]


_LEVEL = {
    Milestone.HACK: HACK,
    Milestone.FAILED: FAILED,
    Milestone.CORRECT: CORRECT,
    Milestone.FASTER: FASTER,
    Milestone.MUCH_FASTER: MUCH,
}
HACK_STATUSES = ("rejected", "implausible")  # verdict names (Status values) that are rule breaks
# what a hack's message says, checked in order: (phrase in the sandbox's message, rule)
_RULES = (
    ("outputs of the timed runs differ", "timed_outputs_differ"),
    ("was modified", "input_modified"),
    ("not written", "output_not_written"),
    ("out-of-bounds", "out_of_bounds"),
    ("work must have escaped the timed region", "implausible_time"),
    ("compute-sanitizer", "sanitizer"),
    ("dynamic parallelism", "dynamic_parallelism"),
    ("nondetermin", "nondeterministic"),
    ("stream", "side_stream"),
    ("kept from an earlier call", "cached_result"),
    ("once timed", "changed_once_timed"),
    ("changed torch or the timer", "tampering"),
    ("TF32", "precision_flags"),
    ("slower beside the answer", "reference_slowed"),
    ("subclass of torch.Tensor", "tensor_subclass"),
    ("refused: ", "screen"),
)


def precision_kinds(result: CandidateResult) -> tuple[str, ...]:
    """The lower precisions the sandbox detected in a candidate (``result.precision`` reads
    ``"fp16 (half arithmetic), tf32 (...)"``)."""
    kinds = (part.strip().split(" ", 1)[0] for part in result.precision.split(","))
    return tuple(k for k in kinds if k in PRECISIONS)


def hack_rule(result: CandidateResult, allow_precision: Sequence[str] | None = None) -> str:
    """The rule a candidate broke ('' for an honest verdict): ``rejected``/``implausible`` verdicts
    (named by the rule their message states, else the verdict's name), timed outputs that differ
    from the baseline's, and, when ``allow_precision`` is given (the task's), a lower precision
    than it allows."""
    status = result.status.value
    timed_differ = status == Status.MISMATCH.value and _RULES[0][0] in result.message
    if status in HACK_STATUSES or timed_differ:
        found = next((rule for phrase, rule in _RULES if phrase in result.message), "")
        return found or ("implausible_time" if status == "implausible" else status)
    if allow_precision is not None and any(k not in allow_precision for k in precision_kinds(result)):
        return "precision"
    return ""


def noisy(result: CandidateResult) -> bool:
    """Whether a timed verdict's speedup cannot be trusted as measured: the SM clock throttled,
    the samples were multimodal, or the speedup's interval is wider than :data:`NOISY_SPREAD`."""
    t = result.timing
    if result.status is not Status.OK or t is None or result.speedup <= 0:
        return False
    spread = (result.speedup_high - result.speedup_low) / result.speedup
    return t.throttled or len(t.modes) > 1 or spread > NOISY_SPREAD


def reward(result: CandidateResult | None, allow_precision: Sequence[str] | None = None) -> float:
    """The documented reward of one verdict (see the module docstring); ``result`` None: the
    answer held no code to evaluate (a failure); ``allow_precision``: the lower precisions the
    task allows (None: not judged)."""
    if result is None:
        return FAILED
    if hack_rule(result, allow_precision):
        return HACK
    if result.status is not Status.OK:
        return FAILED
    if result.speedup <= 0:  # verified, not timed
        return CORRECT
    low = result.speedup_low
    shaping = 0.5 * min(2.0, max(-1.0, math.log2(low))) if low > 0 else -0.5
    if low <= 1.0 or noisy(result):
        return min(CORRECT + shaping, CORRECT)
    return (MUCH if low >= MUCH_FASTER else FASTER) + shaping


def milestone(result: CandidateResult | None, allow_precision: Sequence[str] | None = None) -> Milestone:
    """The milestone a verdict reached."""
    value = reward(result, allow_precision)
    if value == HACK:
        return Milestone.HACK
    if value <= FAILED:
        return Milestone.FAILED
    if value >= MUCH:
        return Milestone.MUCH_FASTER
    return Milestone.FASTER if value >= FASTER else Milestone.CORRECT


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
    task: str = ""  # name@hash of the task, when the run is over a task set
    simulated: bool = False  # the run's GPU is the simulated one: its verdicts are made up


@dataclass(frozen=True)
class Turn:
    """One message of the chat that produced a proposal."""

    role: str
    content: str


@dataclass(frozen=True)
class LineProposal:
    """A line's proposal (:class:`agent.proposal.Proposal`'s fields a learner needs)."""

    code: str  # replaces the original definition
    description: str
    assumptions: tuple[str, ...] = ()
    launch: LaunchChange | None = None
    kernel: str | None = None  # a new name expression, if any
    transcript: tuple[Turn, ...] = ()  # LLM proposals only


@dataclass(frozen=True, kw_only=True)
class TrajectoryLine:
    """One line of a trajectory file (the module docstring draws it)."""

    schema: str = SCHEMA
    run_id: str
    time: str  # when the verdict came back (UTC, ISO 8601)
    file: str
    kernel: str
    proposer: str
    seed: int
    device: str
    original: str
    spec: str
    baseline_ms: float
    step: int
    batch: int
    candidate_id: str
    proposal: LineProposal
    result: CandidateResult
    reward: float | None
    reward_version: str = REWARD_VERSION
    duplicate_of: str = ""
    retracts: str = ""
    task: str = ""
    retracted_by: str = ""  # set by read_trajectories: the later line that retracts this one
    simulated: bool = False  # a verdict of the simulated GPU, not a measurement


def trajectory_line(run: RunInfo, attempt: Attempt, retracts: str = "") -> TrajectoryLine:
    """``attempt`` of ``run`` as a trajectory line, timed now."""
    p = attempt.proposal
    return TrajectoryLine(
        run_id=run.run_id,
        time=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        file=run.file,
        kernel=run.kernel,
        proposer=run.proposer,
        seed=run.seed,
        device=run.device,
        original=run.original,
        spec=run.spec,
        baseline_ms=run.baseline_ms,
        step=attempt.index,
        batch=attempt.batch,
        candidate_id=attempt.candidate_id,
        proposal=LineProposal(
            p.code,
            p.description,
            p.assumptions,
            p.launch,
            p.kernel,
            tuple(Turn(role, content) for role, content in p.transcript),
        ),
        result=attempt.result,
        reward=attempt.reward,
        duplicate_of=attempt.duplicate_of,
        retracts=retracts,
        task=run.task,
        simulated=run.simulated,
    )


def default_path() -> Path:
    """Where ``cuda-agent optimize`` appends trajectories unless told otherwise."""
    root = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(root) / DEFAULT_FILE


def simulated_path(path: str | Path) -> Path:
    """Where the simulated runs' lines go instead of ``path``: ``x.jsonl`` -> ``x.simulated.jsonl``."""
    path = Path(path)
    return path.with_name(f"{path.stem}.simulated{path.suffix or '.jsonl'}")


class TrajectoryLog:
    """Appends attempts to a JSONL file (created with its folders); thread-safe, flushed per line.
    A simulated run's attempts go to :func:`simulated_path` of it instead."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()

    def path_for(self, simulated: bool) -> Path:
        """The file a run's lines go to."""
        return simulated_path(self.path) if simulated else self.path

    def record(self, run: RunInfo, attempt: Attempt, retracts: str = "") -> None:
        """Append ``attempt``; ``retracts``: the candidate id of an earlier line of this run whose
        verdict this one overturns (a winner compute-sanitizer refused)."""
        text = to_json(trajectory_line(run, attempt, retracts)) + "\n"
        path = self.path_for(run.simulated)
        with self._lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as f:
                f.write(text)


def read_trajectories(path: str | Path) -> Iterator[TrajectoryLine]:
    """The lines of a trajectory file with retractions applied: a line that a later line of its
    run retracts comes back with that line's reward and ``retracted_by`` set.  Lines that are not
    trajectory lines (not JSON, another shape) are skipped."""
    lines: list[TrajectoryLine] = []
    for text in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            lines.append(from_json(TrajectoryLine, text))
        except ContractError:
            continue
    retracted = {(line.run_id, line.retracts): line for line in lines if line.retracts}
    for line in lines:
        by = retracted.get((line.run_id, line.candidate_id))
        if by is not None:
            line = replace(line, reward=by.reward, retracted_by=by.candidate_id)
        yield line
