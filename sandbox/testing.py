"""A deterministic, in-process :class:`~sandbox.executor.Executor` that needs no GPU.

``FakeExecutor`` answers every request as a well-behaved GPU would, without running anything.
It does compile (NVRTC, no GPU needed), through the same isolated compile workers and limits as a
real GPU's (:class:`~sandbox.compile_pool.CompilePool`, never in this process): a baseline or
candidate that does not compile is a ``compile_error`` with NVRTC's first error, as on a real GPU.  Otherwise the baseline
takes ``baseline_ms``; a candidate whose source and launches equal the baseline's is exactly as
fast; every other candidate is verified on every problem and seed and runs ``speedup`` times
faster.  Timings carry a fixed ±1% spread, so speedup bounds are real
numbers too.  ``delay_s`` per candidate (honouring ``cancel``) makes runs long enough to watch
progress and cancel them.  Asked to profile (``EvalOptions.profile``), it says that it cannot.

It is what the language server runs with the ``test`` executor (setting ``executor.kind: "test"``
or ``CUDA_AGENT_TEST_EXECUTOR=1``; ``CUDA_AGENT_TEST_EXECUTOR_DELAY`` sets ``delay_s``), for
editor end-to-end tests and demos on machines without a GPU.  Its results say so: the device is
named "simulated GPU".
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import replace

from sandbox.compile_pool import CompilePool
from sandbox.compiler import CompilerUnavailable
from sandbox.contract import (
    Candidate,
    CandidateResult,
    Check,
    DeviceInfo,
    EvalRequest,
    EvalResult,
    KernelSource,
    Problem,
    Profile,
    Progress,
    Resources,
    Status,
    Timing,
    lowered_constants,
)
from sandbox.executor import Executor, ProgressFn
from sandbox.timing import speedups, with_throughput

DELAY_ENV = "CUDA_AGENT_TEST_EXECUTOR_DELAY"
SPREAD = 0.01  # timings are median * (1 ± SPREAD)

DEVICE = DeviceInfo(
    name="simulated GPU",
    compute_capability="9.0",
    sm_count=132,
    l2_bytes=50 << 20,
    memory_bytes=141 << 30,
    driver="none",
    peak_bandwidth_gbps=4300.0,
    peak_gflops=60000.0,
    simulated=True,
)


_SHARED: list[CompilePool] = []
_SHARED_LOCK = threading.Lock()


def shared_compile_pool() -> CompilePool:
    """One compile worker for this process's simulated GPUs (its process ends with this one).
    Started lazily: a simulated GPU that never compiles starts no process."""
    with _SHARED_LOCK:
        if not _SHARED:
            _SHARED.append(CompilePool(workers=1))
        return _SHARED[0]


class FakeExecutor(Executor):
    def __init__(
        self,
        speedup: float = 2.0,
        baseline_ms: float = 1.0,
        delay_s: float = 0.0,
        compiler: CompilePool | None = None,
    ) -> None:
        """``compiler``: where units compile (the caller closes it); by default one isolated
        compile worker this process's simulated GPUs share, started at the first compile."""
        self.speedup = speedup
        self.baseline_ms = baseline_ms
        self.delay_s = delay_s
        self.requests: list[EvalRequest] = []  # every request evaluated, in order
        self._lock = threading.Lock()
        self.compiler = compiler or shared_compile_pool()

    @classmethod
    def from_env(cls) -> FakeExecutor:
        try:
            delay = float(os.environ.get(DELAY_ENV, "0") or 0)
        except ValueError:
            delay = 0.0
        return cls(delay_s=max(delay, 0.0))

    def device_info(self) -> DeviceInfo:
        return DEVICE

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        with self._lock:
            self.requests.append(request)
        arch = request.options.arch or "sm_" + DEVICE.compute_capability.replace(".", "")
        deadline = self.compiler.deadline()
        # the lowered __constant__ names the GPU would look up: their expressions must compile
        constants = lowered_constants((*request.verify_problems, request.bench_problem))
        failed = self._compile_error("baseline", request.baseline, arch, deadline, constants)
        if failed is not None:
            skipped = f"baseline failed: {failed.message}"
            cancelled = tuple(CandidateResult(c.id, Status.CANCELLED, skipped) for c in request.candidates)
            return EvalResult(request.id, failed, cancelled, DEVICE)
        base = self._result("baseline", request, self.baseline_ms, None)
        results: list[CandidateResult] = []
        total = len(request.candidates)
        for done, cand in enumerate(request.candidates):
            if self._wait(cancel):
                results.append(CandidateResult(cand.id, Status.CANCELLED, "cancelled"))
                continue
            failed = self._compile_error(cand.id, cand.kernel, arch, deadline, constants)
            if failed is not None:
                results.append(failed)
            else:
                same = _same(cand, request.baseline)
                ms = self.baseline_ms if same else self.baseline_ms / self.speedup
                results.append(self._result(cand.id, request, ms, base.timing))
            if progress is not None:
                progress(Progress(request.id, done + 1, total, f"{cand.id}: {results[-1].status.value}"))
        return EvalResult(request.id, base, tuple(results), DEVICE)

    def _compile_error(
        self, cid: str, kernel: KernelSource, arch: str, deadline: float, constants: dict[str, str]
    ) -> CandidateResult | None:
        """``kernel``'s compile error verdict, with NVRTC's first error and its log (None when it
        compiles, ``constants``' name expressions included)."""
        try:
            compiled = self.compiler.submit(
                kernel.source,
                filename=kernel.filename,
                name_expressions=(kernel.name, *constants.values()),
                arch=arch,
                options=kernel.options,
                headers=kernel.headers,
                deadline=deadline,
            ).result()
        except CompilerUnavailable as exc:
            return CandidateResult(cid, Status.COMPILE_ERROR, f"NVRTC is not available to compile it: {exc}")
        res = compiled.result
        return None if res.ok else CandidateResult(cid, Status.COMPILE_ERROR, res.first_error(), res.log)

    def _wait(self, cancel: threading.Event | None) -> bool:
        """Spend ``delay_s`` on a candidate; True when the caller cancelled."""
        if cancel is None:
            time.sleep(self.delay_s)
            return False
        return cancel.wait(self.delay_s) if self.delay_s > 0 else cancel.is_set()

    def _result(self, cid: str, request: EvalRequest, ms: float, baseline: Timing | None) -> CandidateResult:
        timing = Timing(ms, ms * (1 - SPREAD), ms * (1 + SPREAD), ms * (1 - SPREAD), 50, 2 * SPREAD)
        checks = tuple(_check(p, s) for p in request.verify_problems for s in request.seeds)
        speedup, low, high = speedups(baseline, timing) if baseline is not None else (0.0, 0.0, 0.0)
        result = CandidateResult(
            candidate_id=cid,
            status=Status.OK,
            checks=checks,
            timing=timing,
            baseline_timing=baseline,
            speedup=speedup,
            speedup_low=low,
            speedup_high=high,
            resources=Resources(registers=32),
        )
        if request.options.profile and cid != "baseline":
            result = replace(result, profile=Profile(False, "the simulated GPU has no Nsight Compute"))
        return with_throughput(result, request.bench_problem, DEVICE)


def _same(cand: Candidate, baseline: KernelSource) -> bool:
    return (
        cand.kernel.source == baseline.source and cand.kernel.name == baseline.name and cand.launches is None
    )


def _check(p: Problem, seed: int) -> Check:
    return Check(label=p.label, seed=seed, ok=True)
