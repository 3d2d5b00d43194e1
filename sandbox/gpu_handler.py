"""The GPU worker's job handler: verify a candidate against the baseline, then time them in pairs.

:class:`GpuHandler` holds one CUDA context for the worker's life; per request it loads the
baseline, computes reference outputs lazily (``sandbox.verify.Verifier``), verifies each candidate
and times it interleaved with the baseline (``sandbox.timing.bench``), then re-checks the outputs
the timed runs left on every rotated input slot.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from sandbox.compiler import compile_cuda
from sandbox.contract import CandidateResult, DeviceInfo, EvalRequest, Launch, Problem, Status
from sandbox.draws import constants_for, elem_type
from sandbox.precision import allowed_roundoff, lower_precision
from sandbox.runtime import CudaError, MemoryCapExceeded, make_runtime
from sandbox.timing import Flusher, Gate, bench, measure_ceilings, modes, paired
from sandbox.verify import DEVICE_MIN_BYTES, GUARD_BYTES, POISON_A, Verifier, Workspace, compare
from sandbox.wire import (
    BuildJob,
    CompileJob,
    EvalJob,
    InfoJob,
    Job,
    Reply,
    TorchJob,
    converter,
    failure_result,
    job_id,
)

log = logging.getLogger(__name__)


HELPERS = r"""
extern "C" __global__ void cuda_agent_scribble(unsigned int pattern, unsigned int words) {
    extern __shared__ unsigned int smem[];
    for (unsigned int i = threadIdx.x; i < words; i += blockDim.x)
        smem[i] = (pattern + blockIdx.x) * 2654435761u ^ (i * 40503u);
}
extern "C" __global__ void cuda_agent_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
extern "C" __global__ void cuda_agent_gate(const volatile int* open, long long max_cycles) {
    long long start = clock64();
    while (*open == 0 && clock64() - start < max_cycles) { }
}
"""
SPIN_CYCLES = 2_000_000
TIMING_SLOTS = 3  # rotated input sets for timing; at least 2 so the rotated re-check means something
LARGE_SLOT = 64 << 20  # bytes of one input set from which timing uses 2 sets


def timing_slots(problem: Problem, cap: int) -> int:
    """How many rotated input sets fit the evaluation's memory cap (baseline and candidate share
    each set; ``inout`` arrays also keep a pristine copy). Large problems use fewer sets: the L2
    flush before every sample already keeps them from being served from cache, and each set
    costs the host a draw of its inputs and the baseline's reference outputs on them (seconds at
    2^26 elements), so sets of ``LARGE_SLOT`` bytes or more use 2."""
    per_slot = sum(
        (a.count * elem_type(a.dtype).itemsize) * (2 if a.role == "inout" else 1) + 2 * GUARD_BYTES
        for a in problem.args
        if a.role != "scalar"
    )
    if per_slot >= LARGE_SLOT:
        return 2
    if not cap or per_slot == 0:
        return TIMING_SLOTS
    return max(2, min(TIMING_SLOTS, cap // per_slot))


def verification_plan(req: EvalRequest) -> list[tuple[Problem, tuple[int, ...]]]:
    """(problem, seeds) to verify on: every verification size on every seed; the benchmark size on
    the first seed only when the request is timed, as the timed runs use the other seeds' inputs
    too and check the outputs the candidate's timed launches leave on each of them."""
    bench_seeds = req.seeds[:1] if req.options.time else req.seeds
    return [(p, req.seeds) for p in req.verify_problems] + [(req.bench_problem, bench_seeds)]


@contextlib.contextmanager
def gpu_lock(key: str, exclusive: bool) -> Iterator[None]:
    """Hold the device's advisory lock, shared by every worker on the machine (a file in
    /dev/shm, which bubblewrap leaves shared, else the temp directory): verification holds it
    shared, timing exclusive, so no other evaluation's GPU work (another worker, a sanitizer run,
    the verification of the next batch) overlaps a timed sample."""
    import fcntl

    root = Path("/dev/shm") if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    name = "cuda-agent-gpu-" + "".join(c if c.isalnum() else "_" for c in key) + ".lock"
    path = (root or Path(tempfile.gettempdir())) / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:  # no lock to be had: say so, and time anyway
        log.warning("cannot open the GPU lock %s: %s", path, exc)
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # releases the lock


class GpuHandler:
    """Serves jobs in the worker process: one CUDA context, state for the latest request."""

    def __init__(self, device: int, backend: str) -> None:
        self.rt = make_runtime(backend, device)
        self.info = self.rt.device_info()
        self.key = self.rt.device_key() or f"index{device}"
        self._helpers: dict[str, Any] = {}
        self._state: tuple[str, Any, Any] | None = None  # request key, baseline handle, verifier
        self._flusher: Any = None
        self._gate: Any = None
        self._scribbles = 0
        # verification on the device (CuPy backend) for problems of at least device_min_bytes,
        # unless device_verify is false: the host path, the oracle of the differential tests and
        # the "before" of bench/verify_cost.py
        self.device_verify = True
        self.device_min_bytes = DEVICE_MIN_BYTES

    def __call__(self, job: Job) -> Reply:
        if isinstance(job, InfoJob):
            return Reply(self.describe(job.known))
        if isinstance(job, CompileJob | TorchJob | BuildJob):
            return Reply(None, unavailable="a CUDA GPU worker neither compiles nor runs PyTorch jobs")
        try:
            return Reply(self.evaluate(job))
        except MemoryCapExceeded as exc:
            return Reply(failure_result(job, Status.LAUNCH_ERROR, str(exc)))
        except CudaError as exc:
            status = Status.CRASH if exc.sticky else Status.LAUNCH_ERROR
            return Reply(failure_result(job, status, str(exc)), restart=exc.sticky)

    def describe(self, known: DeviceInfo | None) -> DeviceInfo:
        if known is None:
            return self.info
        bandwidth, gflops, tensor = measure_ceilings(self.rt)
        return replace(known, peak_bandwidth_gbps=bandwidth, peak_gflops=gflops, peak_tensor_gflops=tensor)

    def _helper(self, name: str) -> Any:
        if name not in self._helpers:
            arch = "sm_" + self.info.compute_capability.replace(".", "")
            compiled = compile_cuda(HELPERS, filename="cuda_agent_helpers.cu", arch=arch)
            if not compiled.result.ok:
                raise RuntimeError(f"helper kernels failed to compile: {compiled.result.log}")
            self._helpers[name] = self.rt.load(compiled.binary, name)
        return self._helpers[name]

    def scribble(self, pattern: int) -> None:
        """Fill the shared memory of every SM with a pattern that changes on every call."""
        self._scribbles += 1
        optin = self.rt.max_shared_optin()
        launch = Launch((2 * self.info.sm_count, 1, 1), (256, 1, 1), optin)
        args = (np.uint32((pattern << 16) ^ self._scribbles), np.uint32(optin // 4))
        self.rt.launch(self._helper("cuda_agent_scribble"), launch, args)

    def clock_mhz(self) -> float:
        start, end = self.rt.event(), self.rt.event()
        self.rt.record(start)
        self.rt.launch(
            self._helper("cuda_agent_spin"), Launch((1, 1, 1), (1, 1, 1)), (np.int64(SPIN_CYCLES),)
        )
        self.rt.record(end)
        self.rt.synchronize()
        return SPIN_CYCLES / (self.rt.elapsed_ms(start, end) * 1e3)

    def _request_state(self, job: EvalJob) -> tuple[Any, Any]:
        """The baseline and a verifier for the job's request, kept while requests share the
        baseline, problems, seeds and tolerance (every batch of one optimize run): inputs are
        drawn and reference outputs computed once per run, not once per batch."""
        req = job.request
        plan = verification_plan(req)
        tolerances = (*req.tolerances, *([req.tolerance] if req.tolerance else []))
        state = converter.unstructure([job.baseline, plan, tolerances])
        key = hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()
        if self._state is None or self._state[0] != key:
            self._state = None  # let the old verifier's host arrays go before drawing new ones
            baseline = self.rt.load(job.baseline.cubin, job.baseline.symbol, job.baseline.symbols)
            verifier = Verifier(
                self.rt,
                plan,
                baseline,
                tolerances,
                self.scribble,
                lambda: gpu_lock(self.key, exclusive=False),
                device=self.device_verify,
                device_min_bytes=self.device_min_bytes,
            )
            self._state = (key, baseline, verifier)
        return self._state[1], self._state[2]

    def evaluate(self, job: EvalJob) -> CandidateResult:
        req = job.request
        cid = job_id(job)
        self.rt.set_memory_limit(0)
        if self._flusher is None:
            self._flusher = Flusher(self.rt, 2 * max(self.info.l2_bytes, 1 << 20))
            self._gate = Gate(self.rt, self._helper("cuda_agent_gate"))
        self._helper("cuda_agent_scribble")
        self._helper("cuda_agent_spin")
        features: dict[str, str] = {}
        if job.candidate is not None:
            features = lower_precision(req.baseline, req.candidates[job.index].kernel)
        precision = ", ".join(f"{kind} ({evidence})" for kind, evidence in features.items())
        allowed = allowed_roundoff(features, req.allow_precision)
        with gpu_lock(self.key, exclusive=False):
            baseline, verifier = self._request_state(job)
        self.rt.set_memory_limit(req.budget.gpu_memory_bytes)
        try:
            if job.candidate is None:
                kernel, launches = baseline, None
            else:
                kernel = self.rt.load(job.candidate.cubin, job.candidate.symbol, job.candidate.symbols)
                launches = req.candidates[job.index].launches
            verdict = verifier.verify(kernel, launches, allowed)  # holds the GPU lock (shared) itself
            if verdict.status is not None:
                result = CandidateResult(cid, verdict.status, verdict.message, checks=verdict.checks)
            elif not req.options.time:
                result = CandidateResult(cid, Status.OK, "verified (not timed)", checks=verdict.checks)
            else:
                bench_launch = launches[-1] if launches else req.bench_problem.launch
                result = self._time(job, baseline, kernel, bench_launch, verifier, verdict.checks, allowed)
            return replace(result, precision=precision)
        finally:
            self.rt.set_memory_limit(0)

    def _time(
        self,
        job: EvalJob,
        baseline: Any,
        kernel: Any,
        launch: Launch,
        verifier: Any,
        checks: Any,
        allowed: float,
    ) -> CandidateResult:
        """Time the kernel (with the baseline, in pairs on shared buffers), then check the outputs
        the candidate's last timed launch left on every rotated input set."""
        req = job.request
        problem = req.bench_problem
        alone = job.candidate is None
        cid = job_id(job)
        index = len(verifier.problems) - 1
        slots = timing_slots(problem, req.budget.gpu_memory_bytes - self.rt.allocated())
        # the run's seeds, then more: each slot its own inputs; one set of __constant__ data, so
        # where a constant copies an argument (`const c copy(filter)`) every slot holds the
        # first seed's inputs (the constant must equal each slot's copy of that argument)
        seeds = [req.seeds[s] if s < len(req.seeds) else req.seeds[0] + 7919 * s for s in range(slots)]
        if any(c.dist.kind == "copy" for c in problem.constants):
            seeds = [seeds[0]] * slots
        arrays = [a for a in problem.args if a.role in ("out", "inout")]
        spaces: list[Workspace] = []
        pristine: list[dict[str, int]] = []
        try:
            for _ in seeds:
                spaces.append(verifier.workspace(index))
            with gpu_lock(self.key, exclusive=False):
                refs = [] if alone else [verifier.reference(index, s, spaces[0], seeds[0]) for s in seeds]
                for ws, seed in zip(spaces, seeds, strict=True):
                    ws.prepare(verifier.inputs(index, seed), POISON_A)
                    copies = {}
                    for a in arrays:
                        if a.role == "inout":
                            copies[a.name] = self.rt.alloc(ws.nbytes[a.name])
                            self.rt.copy_async(copies[a.name], ws.data(a.name), ws.nbytes[a.name])
                    pristine.append(copies)
                for k in (baseline, kernel):
                    for name, host in constants_for(
                        problem, seeds[0], verifier.inputs(index, seeds[0])
                    ).items():
                        self.rt.htod(self.rt.global_symbol(k, name), host)
                self.rt.synchronize()

            def reset(slot: int) -> None:
                ws = spaces[slot]
                for a in arrays:
                    if a.role == "inout":
                        self.rt.copy_async(ws.data(a.name), pristine[slot][a.name], ws.nbytes[a.name])
                    else:
                        self.rt.memset_async(ws.data(a.name), POISON_A, ws.nbytes[a.name])

            runs = [lambda s: self.rt.launch(baseline, problem.launch, spaces[s].args())]
            if not alone:
                runs.append(lambda s: self.rt.launch(kernel, launch, spaces[s].args()))
            with gpu_lock(self.key, exclusive=True):
                sampled = bench(
                    self.rt, runs, slots, self._flusher, req.budget, self.clock_mhz, reset, self._gate
                )
            with verifier.computing(index):  # on the device: outputs compared where they are
                for slot, ws in enumerate([] if alone else spaces):
                    for a in arrays:
                        ref, moved = refs[slot][a.name]
                        calib = verifier.calibration(index, a.name, moved, allowed)
                        cared = verifier.cared(index, seeds[slot], a.name, seeds[0])
                        cmp = compare(ref, ws.read(a.name), a.dtype, calib, cared)
                        if not cmp.ok:
                            return CandidateResult(
                                cid,
                                Status.MISMATCH,
                                f"{problem.label}: the outputs of the timed runs differ from the baseline's "
                                f"on rotated input set {slot} (`{a.name}` {cmp.detail}): "
                                "results depend on earlier calls",
                                checks=checks,
                            )
        finally:
            for ws in spaces:
                ws.close()
            for copies in pristine:
                for ptr in copies.values():
                    self.rt.free(ptr)
        timings = sampled.timings
        note = "; ".join(n for n in (timing_note(timings, sampled.ratios), verifier.spill_note()) if n)
        if alone:
            return CandidateResult(cid, Status.OK, checks=checks, timing=timings[0], note=note)
        speed, low, high = paired(sampled.ratios)
        return CandidateResult(
            cid,
            Status.OK,
            checks=checks,
            timing=timings[1],
            baseline_timing=timings[0],
            speedup=speed,
            speedup_low=low,
            speedup_high=high,
            pairs=len(sampled.ratios),
            note=note,
        )


def timing_note(timings: Sequence[Any], ratios: Sequence[float]) -> str:
    """What the timing needs said with it: multimodal samples (with their modes), throttling."""
    notes = []
    for who, t in zip(("baseline", "candidate") if len(timings) == 2 else ("kernel",), timings, strict=True):
        if t.modes:
            notes.append(f"{who} samples are bimodal ({' ms and '.join(f'{m:.4g}' for m in t.modes)} ms)")
    if len(ratios) >= 2 and (ratio_modes := modes(ratios)):
        notes.append(f"paired ratios are bimodal ({' and '.join(f'{m:.3g}x' for m in ratio_modes)})")
    if any(t.throttled for t in timings):
        notes.append("the SM clock dropped while sampling")
    return "; ".join(notes)
