"""The steps of ``cuda-agent speedup`` (:func:`agent.program.speedup`), told as each one ends.

A job on a real program takes minutes (its runs, the capture, the optimize budget, the rebuild), so
the caller hears of every step as soon as it is done (``optimize_start`` as it begins), with the
seconds since the job began: a job stopped midway (a time limit, a kill) still shows how far it
got and what each step cost.  The CLI prints them on standard error (``--json``: a JSON line
each), the editor shows them as progress, ``bench/program_speedup.py`` writes them as JSON lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.loop import LoopEvent, OptimizeResult
    from agent.target import Target
    from sandbox.capture import CaptureRun


@dataclass(frozen=True)
class Step:
    """One step of the job.  ``step``: ``timed_run`` (a run under the capture library's kernel
    timing), ``run`` (a plain run: wall time), ``ranked``, ``captured``, ``optimize_start``,
    ``optimize_baseline`` (the original kernel measured in the sandbox; the budget starts then),
    ``optimize_end``, ``patch``, ``applied``, ``build``, ``compared``, ``reverted``;
    ``elapsed_s``: seconds since the job began; ``message``: the step in words; ``detail``: its
    numbers (JSON values: seconds, shares, counts)."""

    step: str
    message: str
    elapsed_s: float
    detail: Mapping[str, object] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "step": self.step,
            "elapsed_s": round(self.elapsed_s, 2),
            **self.detail,
            "message": self.message,
        }


ProgressFn = Callable[[Step], None]


def _s(seconds: float) -> float:
    return round(seconds, 3)


class Steps:
    """Tells the caller's :data:`ProgressFn` (None: nobody) each step, timed from its creation."""

    def __init__(self, progress: ProgressFn | None) -> None:
        self.progress = progress
        self.start = time.monotonic()

    def tell(self, step: str, message: str, **detail: object) -> None:
        if self.progress is not None:
            self.progress(Step(step, message, time.monotonic() - self.start, detail))

    def timed_run(self, phase: str, run: CaptureRun) -> None:
        gpu = run.gpu_ns / 1e9
        self.tell(
            "timed_run",
            f"{phase}: timed run {run.seconds:.1f} s, kernels {gpu:.3f} s ({len(run.times)} kernel(s)), "
            f"exit status {run.returncode}",
            phase=phase,
            seconds=_s(run.seconds),
            gpu_s=round(gpu, 4),
            kernels_timed=len(run.times),
            launches=sum(t.launches for t in run.times.values()),
            returncode=run.returncode,
        )

    def run(self, phase: str, number: int, of: int, run: CaptureRun) -> None:
        self.tell(
            "run",
            f"{phase}: run {number} of {of} {run.seconds:.2f} s, exit status {run.returncode}",
            phase=phase,
            run=number,
            of=of,
            seconds=_s(run.seconds),
            returncode=run.returncode,
        )

    def ranked(self, kernels: Sequence[tuple[str, int, float, bool]], wall_s: float, gpu_s: float) -> None:
        """``kernels``: (name, launches, share of GPU time, chosen), hottest first."""
        top = ", ".join(
            f"{'*' if chosen else ''}{name.split('(')[0]} {share:.0%}"
            for name, _, share, chosen in kernels[:5]
        )
        self.tell(
            "ranked",
            f"kernels by GPU time: {top}",
            wall_s=_s(wall_s),
            gpu_s=round(gpu_s, 4),
            kernels=[
                {"kernel": name, "launches": launches, "share": round(share, 4), "chosen": chosen}
                for name, launches, share, chosen in kernels
            ],
        )

    def captured(self, kernel: str, began: float, run: CaptureRun, target: Target) -> None:
        saved = any(q.label == "recorded" for q in target.verify_problems)
        self.tell(
            "captured",
            f"{kernel}: {len(run.launches)} launch(es) recorded in {run.seconds:.1f} s, "
            + ("inputs saved" if saved else "inputs not saved"),
            kernel=kernel,
            seconds=_s(time.monotonic() - began),
            run_s=_s(run.seconds),
            launches=len(run.launches),
            recorded_inputs=saved,
            bench_sizes=dict(target.bench_problem.sizes),
        )

    def not_captured(self, kernel: str, began: float, error: Exception) -> None:
        self.tell(
            "captured",
            f"{kernel}: no spec ({error})",
            kernel=kernel,
            seconds=_s(time.monotonic() - began),
            error=str(error),
        )

    def optimize_start(self, kernel: str, budget_s: float) -> Callable[[LoopEvent], None]:
        """Tells the start; returns the loop's event handler that tells its baseline measured."""
        self.tell(
            "optimize_start",
            f"optimizing {kernel} ({budget_s:.0f} s)",
            kernel=kernel,
            budget_s=round(budget_s, 1),
        )

        def on_event(e: LoopEvent) -> None:
            if e.kind == "baseline":
                self.tell("optimize_baseline", f"{kernel}: {e.message}", kernel=kernel)

        return on_event

    def optimize_end(
        self, kernel: str, result: OptimizeResult, applied: bool, speedup: float, why: str
    ) -> None:
        verdict = f"{speedup:.2f}x, applied" if applied else f"refused: {why}"
        self.tell(
            "optimize_end",
            f"{kernel}: {verdict} ({result.attempts} attempt(s) in {result.seconds:.1f} s; {result.stop})",
            kernel=kernel,
            seconds=_s(result.seconds),
            baseline_s=_s(result.baseline_seconds),
            attempts=result.attempts,
            stop=str(result.stop),
            applied=applied,
            speedup=round(speedup, 3),
            why=why,
        )

    def patch(self, files: Sequence[str], applied: Sequence[str], predicted: float) -> None:
        self.tell(
            "patch",
            f"patch: {len(files)} file(s), predicted {predicted:.3f}x end to end",
            files=sorted(files),
            applied=list(applied),
            predicted=round(predicted, 4),
        )

    def build(self, why: str, command: str, began: float, code: int) -> None:
        seconds = time.monotonic() - began
        self.tell(
            "build",
            f"{why}: `{command}` exit status {code} in {seconds:.1f} s",
            of=why,
            seconds=_s(seconds),
            returncode=code,
        )

    def compared(self, differences: Sequence[object], wall_before_s: float, wall_after_s: float) -> None:
        self.tell(
            "compared",
            f"outputs differ: {differences[0]}" if differences else "outputs equal",
            equal=not differences,
            differences=[str(d) for d in differences[:5]],
            wall_before_s=_s(wall_before_s),
            wall_after_s=_s(wall_after_s),
        )
