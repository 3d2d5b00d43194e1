"""An executor whose verdicts are chosen by markers in the candidate's source, and scripted proposers.

Markers (comments in a candidate's code): ``// speedup=X`` verified and X times faster;
``racy`` fails compute-sanitizer (requests with ``options.sanitize``);
``// compile_error``; ``// mismatch`` (wrong on the odd verification size); ``// delay=S`` takes S
seconds (honouring cancel); ``// die`` raises :class:`~sandbox.executor.WorkerUnavailable`.
``baseline_s``: how long measuring the original takes (a request without candidates).
No marker: verified and exactly as fast as the baseline.  Nothing is compiled or run.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from agent.proposal import Attempt, Proposal
from agent.proposer import OptimizeContext, Proposer
from agent.target import Target, target_for
from cudasrc.source import Document
from sandbox.contract import (
    CandidateResult,
    Check,
    DeviceInfo,
    EvalRequest,
    EvalResult,
    Progress,
    Resources,
    Status,
    Timing,
)
from sandbox.executor import Executor, NoGpuError, ProgressFn, WorkerUnavailable
from sandbox.timing import speedups

DATA = Path(__file__).parent / "data"
SAXPY = DATA / "optimize" / "saxpy_poor_block.cu"
DEVICE = DeviceInfo("Marker GPU", "9.0", 132, 50 << 20, 141 << 30, peak_bandwidth_gbps=4300.0)
BASE_MS = 1.0
SPREAD = 0.01


def saxpy_target() -> Target:
    return target_for(Document.from_file(SAXPY))


def variant(target: Target, marker: str, tweak: str = "") -> str:
    """The target's kernel with a marker comment (and an optional distinguishing statement)."""
    body = target.definition.rstrip()
    assert body.endswith("}")
    return body[:-1] + f"    {tweak}// {marker}\n}}\n"


def _timing(ms: float) -> Timing:
    return Timing(ms, ms * (1 - SPREAD), ms * (1 + SPREAD), ms * (1 - SPREAD), 40, 2 * SPREAD)


class MarkerExecutor(Executor):
    def __init__(self, baseline: Status = Status.OK, no_gpu: bool = False, baseline_s: float = 0.0) -> None:
        self.baseline_status = baseline
        self.no_gpu = no_gpu
        self.baseline_s = baseline_s
        self.requests: list[EvalRequest] = []
        self.evaluated: list[tuple[float, float, str]] = []  # (start, end, request id)
        self._lock = threading.Lock()

    def device_info(self) -> DeviceInfo:
        return DEVICE

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        if self.no_gpu:
            raise NoGpuError("no GPU: CUDA driver not found")
        start = time.monotonic()
        with self._lock:
            self.requests.append(request)
        if not request.candidates:
            time.sleep(self.baseline_s)
        base_timing = _timing(BASE_MS)
        base = CandidateResult("baseline", self.baseline_status, timing=base_timing, message="baseline")
        out = []
        for i, cand in enumerate(request.candidates):
            src = cand.kernel.source
            if "// die" in src:
                raise WorkerUnavailable("worker died and did not come back")
            delay = re.search(r"\bdelay=([\d.]+)", src)
            if delay and cancel is not None and cancel.wait(float(delay[1])):
                out.append(CandidateResult(cand.id, Status.CANCELLED, "cancelled"))
                continue
            if cancel is not None and cancel.is_set():
                out.append(CandidateResult(cand.id, Status.CANCELLED, "cancelled"))
                continue
            if request.options.sanitize:
                out.append(self._sanitized(cand.id, src))
                continue
            out.append(self._verdict(cand.id, src, request, base_timing))
            if progress:
                progress(Progress(request.id, i + 1, len(request.candidates), f"{cand.id} done"))
        with self._lock:
            self.evaluated.append((start, time.monotonic(), request.id))
        return EvalResult(request.id, base, tuple(out), DEVICE)

    def _sanitized(self, cid: str, src: str) -> CandidateResult:
        if "racy" in src:
            return CandidateResult(
                cid, Status.REJECTED, "compute-sanitizer racecheck: 1 hazard", sanitizer="racecheck: 1 hazard"
            )
        return CandidateResult(cid, Status.OK, sanitizer="memcheck: 0 errors; racecheck: 0 hazards")

    def _verdict(self, cid: str, src: str, request: EvalRequest, base: Timing) -> CandidateResult:
        if "// compile_error" in src:
            return CandidateResult(
                cid,
                Status.COMPILE_ERROR,
                "compilation failed",
                compile_log="kernel.cu(12): error: expected a ';'",
            )
        labels = [p.label for p in (*request.verify_problems, request.bench_problem)]
        if "// mismatch" in src:
            checks = tuple(
                Check(
                    lbl,
                    s,
                    ok=lbl != "n=4097",
                    max_abs_err=0.0 if lbl != "n=4097" else 2.5,
                    first_bad_index=4096 if lbl == "n=4097" else -1,
                    arg="y",
                )
                for lbl in labels
                for s in request.seeds
            )
            return CandidateResult(cid, Status.MISMATCH, "outputs differ at n=4097", checks=checks)
        m = re.search(r"\bspeedup=([\d.]+)", src)
        speedup = float(m[1]) if m else 1.0
        t = _timing(BASE_MS / speedup)
        ratio, low, high = speedups(base, t)
        checks = tuple(
            Check(lbl, s, ok=True, max_abs_err=1e-7, max_rel_err=1e-6)
            for lbl in labels
            for s in request.seeds
        )
        return CandidateResult(
            cid,
            Status.OK,
            checks=checks,
            timing=t,
            baseline_timing=base,
            speedup=ratio,
            speedup_low=low,
            speedup_high=high,
            resources=Resources(registers=16),
            achieved_gbps=1000 * speedup,
            pct_peak_bandwidth=100 * 1000 * speedup / 4300,
        )


Plan = Callable[[int, Sequence[Attempt], int], list[Proposal]]


class ScriptedProposer(Proposer):
    """Proposes what ``plan(call_index, history, n)`` returns; records what it saw."""

    name = "scripted"

    def __init__(self, plan: Plan, tokens_per_call: int = 0) -> None:
        self.plan = plan
        self.calls = 0
        self.seen: list[int] = []  # len(history) at each propose call
        self.observed: list[list[str]] = []
        self.propose_times: list[float] = []
        self.tokens_per_call = tokens_per_call
        self._tokens = 0

    @property
    def tokens_used(self) -> int:
        return self._tokens

    def propose(self, context: OptimizeContext, history: Sequence[Attempt], n: int) -> list[Proposal]:
        self.propose_times.append(time.monotonic())
        self.seen.append(len(history))
        self._tokens += self.tokens_per_call
        out = self.plan(self.calls, history, n)
        self.calls += 1
        return out

    def observe(self, attempts: Sequence[Attempt]) -> None:
        self.observed.append([a.candidate_id for a in attempts])
