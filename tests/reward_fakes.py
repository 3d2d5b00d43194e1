"""A simulated GPU with verdicts chosen by markers in the candidate's source, for the reward tests.

``FakeExecutor`` compiles every candidate with NVRTC (a broken one is a compile error) and runs an
edited one 2x faster; on top, a candidate whose source holds one of these markers gets that verdict::

    HACK_INPUT     rejected: an input was modified
    HACK_TIMER     implausible time (the sandbox rejects it)
    WRONG          mismatch
    SLOW           ok, 0.5x
    BARELY         ok, 1.2x
    NOISY          ok, but a wide speedup interval (noisy)

PyTorch tasks (``evaluate_torch``): the answer is screened as the sandbox screens it
(``sandbox.screen.screen``), then ``WRONG``/``HACK_INPUT`` as above, ``FAST`` ok at 2x eager
(1.5x ``torch.compile``), anything else ok at 1x eager (0.7x ``torch.compile``), each ok one
1.5 s in its ``time_s`` phase;
``task_error``: the task's own model fails.

``ScriptedTorchHandler`` stands in for ``sandbox.torch_eval:TorchHandler`` in a worker process:
an answer holding ``HANG`` sleeps, ``DIE`` kills its process, ``BUSY`` keeps the device half a
second; anything else is ok with its process's id, start and evaluation (``time.monotonic()``: one
clock for every process) in the message, ``pid P started S ran R1-R2``.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace
from typing import Any

from sandbox.contract import (
    CandidateResult,
    EvalRequest,
    EvalResult,
    Status,
    TorchCandidateResult,
    TorchRequest,
    TorchResult,
)
from sandbox.executor import ProgressFn
from sandbox.screen import screen
from sandbox.testing import DEVICE, FakeExecutor

DEFINITION_OF = {
    "HACK_INPUT": (Status.REJECTED, "n=1000 seed 1: input `x` was modified"),
    "HACK_TIMER": (
        Status.REJECTED,
        "measured 9000 GB/s = 210% of the device's measured bandwidth ceiling: work must have escaped "
        "the timed region (or the spec's work count is too high)",
    ),
    "WRONG": (Status.MISMATCH, "mismatch in `y` at n=1000: max abs err 0.5"),
}
SPEEDS = {"SLOW": 0.5, "BARELY": 1.2}


class MarkedExecutor(FakeExecutor):
    def __init__(self, delay_s: float = 0.0) -> None:
        super().__init__(speedup=2.0, delay_s=delay_s)
        self.lock = threading.Lock()
        self.torch_requests: list[TorchRequest] = []
        self.task_error = ""

    def evaluate_torch(self, request: TorchRequest, *, cancel: threading.Event | None = None) -> TorchResult:
        with self.lock:
            self.torch_requests.append(request)
        return TorchResult(
            request.id, tuple(self._torch_verdict(c.id, c.source) for c in request.candidates), DEVICE
        )

    def _torch_verdict(self, cid: str, source: str) -> TorchCandidateResult:
        if self.task_error:
            return TorchCandidateResult(
                CandidateResult(cid, Status.CRASH, self.task_error), task_error=self.task_error
            )
        status, why = screen(source)
        if status is not None:
            return TorchCandidateResult(CandidateResult(cid, status, why))
        for marker, (status, message) in DEFINITION_OF.items():
            if marker in source:
                return TorchCandidateResult(CandidateResult(cid, status, message))
        eager, compiled = (2.0, 1.5) if "FAST" in source else (1.0, 0.7)
        ok = CandidateResult(
            cid,
            Status.OK,
            "verified",
            speedup=eager,
            speedup_low=eager * 0.98,
            speedup_high=eager * 1.02,
            pairs=40,
        )
        return TorchCandidateResult(ok, compiled, compiled * 0.98, compiled * 1.02, phases={"time_s": 1.5})

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        result = super().evaluate(request, progress=progress, cancel=cancel)
        sources = {c.id: c.kernel.source for c in request.candidates}
        out = []
        for r in result.candidates:
            src = sources[r.candidate_id]
            if r.status is Status.OK:
                r = _marked(r, src)
            out.append(r)
        return replace(result, candidates=tuple(out))


def _marked(r: CandidateResult, source: str) -> CandidateResult:
    for marker, (status, message) in DEFINITION_OF.items():
        if marker in source:
            return replace(r, status=status, message=message)
    for marker, speed in SPEEDS.items():
        if marker in source:
            return replace(r, speedup=speed, speedup_low=speed * 0.98, speedup_high=speed * 1.02)
    if "NOISY" in source:
        return replace(r, speedup_low=r.speedup * 0.6, speedup_high=r.speedup * 1.4)
    return r


class ScriptedTorchHandler:
    def __init__(self, device: int, backend: str) -> None:
        self.started = time.monotonic()

    def __call__(self, job: Any) -> Any:
        from sandbox.wire import InfoJob, Reply

        if isinstance(job, InfoJob):
            return Reply(DEVICE)
        cand = job.candidate
        if "HANG" in cand.source:
            time.sleep(600)
        if "DIE" in cand.source:
            os._exit(3)
        ran = time.monotonic()
        if "BUSY" in cand.source:
            time.sleep(0.5)
        message = f"pid {os.getpid()} started {self.started} ran {ran}-{time.monotonic()}"
        return Reply(
            TorchCandidateResult(CandidateResult(cand.id, Status.OK, message), phases={"time_s": 0.1})
        )
