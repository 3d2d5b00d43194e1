"""KernelBench-format (PyTorch) evaluation, on the sandbox's side of the boundary.

A task is Python defining ``class Model(torch.nn.Module)``, ``get_inputs()``,
``get_init_inputs()`` and optionally ``get_verify_inputs()`` (further input sets: other sizes);
an answer is Python defining ``class ModelNew(torch.nn.Module)``, usually with a CUDA kernel built
by ``torch.utils.cpp_extension.load_inline``.  Task code is trusted (the server's own files); the
answer is not, and it only ever runs here: :class:`TorchHandler` serves one :class:`TorchJob` in a
GPU worker process of its own (``sandbox.local.LocalExecutor.evaluate_torch`` starts a fresh one
per candidate, with the GPU workers' isolation: ``bwrap``, clean environment, own process group,
killed at the deadline; a crash, a hang or an exception is that candidate's verdict).

Per candidate, in order (what the answer could do about each step: :mod:`sandbox.torch_trust`):

1. the answer is screened (:func:`sandbox.screen.screen`): imports of torch, the kernel languages
   (Triton, CuTe DSL, TileLang) and a few standard modules; attributes written only through the
   answer's own objects; no dunders, no private attributes of others -- ``rejected``;
2. before any answer code runs, the reference ``Model`` (weights seeded) computes its outputs on
   fresh inputs per seed (``get_inputs()`` seeded, each set of ``get_verify_inputs()``, and the
   first seed's inputs with two elements swapped), and on the same inputs perturbed by
   ``1 ± rho`` (the calibration of ``sandbox.verify``'s tolerance model).  Outputs go to the
   host; inputs are regenerated from their seed when needed; every tensor freed on the device is
   poisoned first.  When timed: the reference's bytes and FLOPs, the device's copy bandwidth and
   GEMM rate at the pinned precision (the executor's, measured once per device:
   :attr:`~sandbox.wire.TorchJob.device`; measured here for a type they do not cover), and the
   reference's time alone; then the :class:`~sandbox.torch_trust.Guard` captures torch and the
   timer;
3. ``ModelNew`` is built with the same init inputs and the same seed;
4. each input set: the outputs must be plain tensors, complete on the caller's stream when
   ``forward`` returns, hold none of the poison, leave the inputs' bytes alone, and torch, the
   timer and the precision flags must be as captured -- ``rejected``; then compared by
   :func:`sandbox.verify.compare` (in pieces of 2^24 elements) -- ``mismatch``, or ``rejected``
   when the output is right for an earlier input set (a result kept across calls);
5. timing (``sandbox.timing.bench``: CUDA events, each sample ended by a device-wide synchronize
   so the work of every stream counts, the L2 flushed before every sample, eager and
   ``ModelNew`` in interleaved pairs, median and quartiles of the paired ratios; each sample's
   float inputs scaled by a factor no sample repeats), then again against
   ``torch.compile(Model)``.  Afterwards the answer is checked again on every seed's inputs and
   the swapped ones in the timed tensors (``rejected``: a cache by pointer, shape or fingerprint,
   work that stops once verified); the reference's time beside the answer against its time
   alone (``rejected`` when the answer slowed it down); the physics floor, and for a speedup of
   1.5 or more the host clock's agreement (``implausible``).

Device memory held: at most :attr:`TaskMemory.planned` (two input sets, two output sets, the
parameters twice, a fixed overhead): within three times the task's own footprint.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, cast

import numpy as np

from sandbox import timing, verify
from sandbox.contract import (
    Budget,
    CandidateResult,
    Check,
    DeviceInfo,
    Status,
    Timing,
    TorchCandidateResult,
    TorchRequest,
)
from sandbox.runtime import Runtime
from sandbox.screen import screen
from sandbox.timing import PLAUSIBLE_PCT, Flusher, Sampled, bench, implausible, paired, percent_of_peak
from sandbox.torch_trust import (
    Guard,
    TorchClock,
    Work,
    ceilings,
    nbytes,
    pin,
    pinned,
    poison,
    poison_free,
    poisoned,
    ready,
    same_bytes,
    wall_ms,
    work,
)
from sandbox.verify import PERTURBATION, Agreement, Calibration, checked, compare
from sandbox.wire import InfoJob, Reply, TorchJob

log = logging.getLogger(__name__)

TORCH_HANDLER = "sandbox.torch_eval:TorchHandler"
# on top of the budget's timeout: importing torch, load_inline's nvcc, torch.compile
BUILD_ALLOWANCE_S = 180.0
MESSAGE_CHARS = 600


# --------------------------------------------------------------------------- comparison


def reduction_length(inputs: Sequence[Any], params: Sequence[Any], outputs: Sequence[Any]) -> int:
    """How many terms an output element may sum, as far as the shapes show: input and parameter
    elements per output element, and the longest dimension of any input or parameter."""
    ins = sum(int(t.numel()) for t in (*inputs, *params))
    outs = max(1, sum(int(t.numel()) for t in outputs))
    longest = max([1, *(int(d) for t in (*inputs, *params) for d in t.shape)])
    return max(1, round(ins / outs), longest)


def dtype_name(t: Any) -> str:
    """``torch.float32`` -> ``float32`` (``sandbox.verify``'s element type names)."""
    return str(t.dtype).removeprefix("torch.")


def raw(t: Any) -> Any:
    """A tensor as the raw array :func:`sandbox.verify.compare` reads: CuPy on the device
    (DLPack, no copy), numpy on the host; bfloat16 as its 16 bits."""
    t = t.detach().contiguous()
    name = dtype_name(t)
    if name == "bfloat16":
        t = t.view(_torch().int16)
    try:
        import cupy  # the GPU worker's array library: compare where the tensor is
    except ImportError:
        cupy = None
    arr = cupy.from_dlpack(t) if t.device.type == "cuda" and cupy is not None else t.cpu().numpy()
    return arr.view(np.uint16) if name == "bfloat16" else arr


CHUNK = 1 << 22  # elements compared or perturbed at once (the comparison's float64 temporaries stay ~0.4 GB)


def compare_outputs(
    label: str,
    seed: int,
    ref: Sequence[Any],
    moved: Sequence[Any],
    got: Sequence[Any],
    n: int,
    device: Any = None,
) -> Check:
    """``got`` (on ``device``; None: where ``ref`` is) against the reference's outputs ``ref``
    (``moved``: on perturbed inputs; both may be kept on the host): the same count, shapes and
    dtypes, then :func:`sandbox.verify.compare` per output, in pieces of :data:`CHUNK` elements
    for larger outputs (each piece calibrated on its own: the statistics of 2^24 elements)."""
    if len(got) != len(ref):
        return Check(label, seed, False, detail=f"{len(got)} outputs where the reference has {len(ref)}")
    worst: Check | None = None
    for i, (r, m, g) in enumerate(zip(ref, moved, got, strict=True)):
        arg = f"output {i}"
        if tuple(g.shape) != tuple(r.shape) or g.dtype != r.dtype:
            detail = f"{arg} is {g.dtype} {tuple(g.shape)}, the reference's {r.dtype} {tuple(r.shape)}"
            return Check(label, seed, False, arg=arg, detail=detail)
        where = r.device if device is None else device
        if g.device != where:
            return Check(label, seed, False, arg=arg, detail=f"{arg} is on {g.device}, not {where}")
        flat_r, flat_m, flat_g = (t.detach().contiguous().reshape(-1) for t in (r, m, g))
        for start in range(0, max(1, flat_r.numel()), CHUNK):
            part = slice(start, start + CHUNK)
            # compare moves the reference's pieces where ``got`` is
            calib = Calibration(perturbed=raw(flat_m[part]), rho=PERTURBATION, n=n)
            cmp: Agreement = compare(raw(flat_r[part]), raw(flat_g[part]), dtype_name(r), calib)
            if cmp.first_bad_index >= 0:
                cmp = replace(cmp, first_bad_index=cmp.first_bad_index + start)
            check = checked(label, seed, cmp.ok, cmp.detail, arg, cmp)
            if not cmp.ok:
                return check
            if worst is None or check.error_ratio > worst.error_ratio:
                worst = check
    return worst or Check(label, seed, True)


def outputs_of(value: Any) -> list[Any] | str:
    """A forward's result as a list of tensors, or why it is not one."""
    torch = _torch()
    items = list(value) if isinstance(value, tuple | list) else [value]
    for i, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            return f"output {i} is a {type(item).__name__}, not a tensor"
    return items


# --------------------------------------------------------------------------- the memory plan

PLAN_FACTOR = 3  # device memory held for one evaluation: at most this many times the task's own
# plus this, the largest of what a phase allocates beside the task's tensors: the ceilings' copy
# (2 x 256 MiB) and GEMM (3 x 64 MiB, fp32 4096^2), the comparison's float64 pieces (~0.4 GB at
# CHUNK), the perturbation's pieces; and the L2 flush buffer (2 x L2, 100 MB on an H100)
PLAN_OVERHEAD = 1 << 30


@dataclass(frozen=True)
class TaskMemory:
    """A task's own device memory at its benchmark size: inputs, outputs, parameters and buffers."""

    inputs: int
    outputs: int
    params: int

    @property
    def total(self) -> int:
        return self.inputs + self.outputs + self.params

    @property
    def planned(self) -> int:
        """What one evaluation holds at most: the reference's parameters and the answer's (as
        many), two input sets (the set an output is checked on and that set regenerated to
        check the answer left it alone; the reference's inputs and their perturbed copy; timed
        samples rescale one set in place), two output sets (the answer's on this set and on the
        previous one, kept alive to see it return the same memory), and :data:`PLAN_OVERHEAD`.
        References, perturbed references and every other input set wait on the host (or are
        regenerated from their seed), so the plan stays within ``PLAN_FACTOR`` times
        :attr:`total` plus the overhead."""
        return 2 * self.params + 2 * self.inputs + 2 * self.outputs + PLAN_OVERHEAD


def footprint(task_source: str) -> TaskMemory:
    """A task's :class:`TaskMemory` without a GPU: the model and its inputs built on the meta
    device and its forward run there for the outputs' shapes (a model whose forward needs values,
    ``.item()``, runs on the host instead)."""
    torch = _torch()
    task = _module(task_source, "task.py")

    def run(device: str) -> TaskMemory:
        torch.manual_seed(0)
        with torch.device(device), torch.no_grad():
            model = task["Model"](*task["get_init_inputs"]())
            inputs = list(task["get_inputs"]())
            out = model(*inputs)
        outs = list(out) if isinstance(out, tuple | list) else [out]
        return TaskMemory(
            nbytes(torch, inputs), nbytes(torch, outs), nbytes(torch, [*model.parameters(), *model.buffers()])
        )

    try:
        return run("meta")
    except (RuntimeError, NotImplementedError):  # data-dependent: on the host, at its real size
        return run("cpu")


# --------------------------------------------------------------------------- the handler

FRESH_STEP = 2.0**-16  # timed sample k's float inputs: the first seed's, scaled by 1 + k * FRESH_STEP
REFERENCE_BUDGET = Budget(min_samples=10, max_samples=40, time_budget_ms=150.0)
DRIFT = 1.5  # the reference may not run this much slower in the pairs than before the answer was loaded
DRIFT_FLOOR_MS = 0.02  # ...nor by less than this (the host's launch jitter on tiny tasks)
RETIME_FROM = 1.5  # a speedup from here on is re-timed by the host clock
# the host clock brackets the interval the events bracket, from the same device-wide synchronize
# to the next: it adds only the host's wake-up and launch latency (a launch + synchronize round
# trip is ~10 us on an H100), so an answer whose host-clock median exceeds its event median by
# more than WALL_AGREE times plus WALL_SLACK_MS ran work the events did not see
WALL_AGREE = 1.5
WALL_SLACK_MS = 0.05
WALL_CALLS = 30


def _torch() -> Any:
    import torch

    return torch


EXTENSIONS = "extensions"  # TORCH_EXTENSIONS_DIR under a build directory (sandbox.torch_build)
TRITON = "triton"  # TRITON_CACHE_DIR under it


def point_at(directory: str, arch: str) -> None:
    """Make this process's ``load_inline`` and Triton build into / load from ``directory`` (the
    build stage's, :mod:`sandbox.torch_build`); ``arch``: ``TORCH_CUDA_ARCH_LIST``, the same at
    build and at load (other ``-gencode`` flags and ninja would build again)."""
    os.environ["TORCH_EXTENSIONS_DIR"] = os.path.join(directory, EXTENSIONS)
    os.environ["TRITON_CACHE_DIR"] = os.path.join(directory, TRITON)
    if arch:
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch


def _preload() -> None:
    """Import what answers build and launch with (``load_inline``'s module, Triton), so a
    process started ahead of its answer (``sandbox.local``) pays for it while it waits, not on
    the answer's clock; trusted modules, imported before the guard captures anything."""
    import torch.utils.cpp_extension  # noqa: F401

    try:
        import triton  # noqa: F401
    except Exception:  # not installed, or unusable here: an answer that imports it meets that itself
        log.debug("triton is not importable in the PyTorch worker", exc_info=True)


def _module(source: str, filename: str) -> dict[str, Any]:
    """Run ``source`` as a module from a file of its own (Triton's ``@jit``, CuTe DSL and
    TileLang read their kernels' source back through ``inspect``)."""
    path = os.path.join(tempfile.mkdtemp(prefix="torch-eval-"), filename)
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    namespace: dict[str, Any] = {"__name__": filename.removesuffix(".py"), "__file__": path}
    exec(compile(source, path, "exec"), namespace)
    return namespace


def _why(exc: BaseException) -> str:
    """An exception in one line, where in the answer it was raised first."""
    where = [
        f for f in traceback.extract_tb(exc.__traceback__) if os.path.basename(f.filename) == "answer.py"
    ]
    at = f" (answer line {where[-1].lineno})" if where else ""
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}{at}"[
        :MESSAGE_CHARS
    ]


class Phases:
    """Seconds per phase of one evaluation (:attr:`~sandbox.contract.TorchCandidateResult.phases`),
    each ended by ``settle`` (the device's queue drained, so a phase's GPU work counts in it)."""

    def __init__(self, settle: Callable[[], None]) -> None:
        self.settle = settle
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
            self.settle()  # not after an exception: a sticky CUDA error is the step's own to report
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


@dataclass
class _Case:
    """One input set: ``make()`` regenerates its inputs on the device (seeded: the same bytes
    every time); the reference's outputs ``ref`` and on perturbed inputs ``moved`` are kept on
    the host."""

    label: str
    seed: int
    make: Callable[[], list[Any]]
    ref: list[Any]
    moved: list[Any]
    n: int


@dataclass
class _Bench:
    """What timing needs, set up before the answer is imported: the clock, the tensors the timed
    calls read (``live``: the first seed's benchmark inputs, scaled by ``scale``), the
    reference's work and the device's ceilings, and the reference's time alone."""

    clock: TorchClock
    live: list[Any]
    work: Work
    bandwidth_gbps: float
    gflops: float
    alone: Timing | None = None
    fresh: int = 0
    scale: float = 1.0

    def refill(self, _slot: int) -> None:
        """The next sample's inputs, in place: the float inputs rescaled so they are the
        benchmark inputs times a factor no sample repeats (an answer that skips work when its
        inputs repeat, or keys a cache by pointer or shape, computes every sample); no second
        copy of the inputs is held.  Integer inputs stay as they are."""
        self.fresh += 1
        scale = 1.0 + self.fresh * FRESH_STEP
        torch = self.clock.torch
        for t in self.live:
            if isinstance(t, torch.Tensor) and t.is_floating_point():
                t.mul_(scale / self.scale)
        self.scale = scale

    def load(self, inputs: Sequence[Any]) -> None:
        """``live`` set to ``inputs`` (unscaled), in place."""
        for dst, src in zip(self.live, inputs, strict=True):
            if isinstance(dst, self.clock.torch.Tensor):
                dst.copy_(src)
        self.scale = 1.0


class TorchHandler:
    """Serves :class:`TorchJob` s (and device descriptions) in a worker process; ``backend``
    ``cpu`` runs on the host (tests), anything else on CUDA device ``device``."""

    def __init__(self, device: int, backend: str) -> None:
        start = time.perf_counter()
        torch = _torch()
        self.torch = torch
        if backend == "cpu":
            self.device = torch.device("cpu")
        else:
            if not torch.cuda.is_available():
                raise RuntimeError("torch sees no CUDA device")
            self.device = torch.device("cuda", device)
            torch.cuda.set_device(self.device)
        tmp = tempfile.gettempdir()
        os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(tmp, "torch-extensions"))
        os.environ.setdefault("TRITON_CACHE_DIR", os.path.join(tmp, "triton-cache"))
        pin(torch)
        self.cuda = self.device.type == "cuda"
        if self.cuda:
            _preload()
        self.phases = Phases(self._sync)
        # this process's start (torch imported, the device's context): on its first evaluation's account
        self._startup_s = time.perf_counter() - start

    def describe(self) -> DeviceInfo:
        torch = self.torch
        if not self.cuda:
            return DeviceInfo("cpu", "", os.cpu_count() or 1, 0, 0)
        p = torch.cuda.get_device_properties(self.device)
        return DeviceInfo(
            p.name,
            f"{p.major}.{p.minor}",
            p.multi_processor_count,
            int(getattr(p, "L2_cache_size", 0)),
            p.total_memory,
            index=self.device.index or 0,
        )

    def flush_bytes(self) -> int:
        l2 = self.describe().l2_bytes
        return 2 * l2 if l2 else 64 << 20

    def _sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def evaluate(self, job: TorchJob) -> TorchCandidateResult:
        start = time.perf_counter()
        phase = self.phases = Phases(self._sync)
        if self._startup_s:
            phase.seconds["startup_s"], self._startup_s = self._startup_s, 0.0
        cid, req = job.candidate.id, job.request
        if job.build_dir:  # the build stage built it there: load_inline only loads it
            point_at(job.build_dir, job.arch)
        memory: dict[str, Any] = {}

        def verdict(
            status: Status, message: str, checks: tuple[Any, ...] = (), **kw: Any
        ) -> TorchCandidateResult:
            result = CandidateResult(
                cid,
                status,
                message[:MESSAGE_CHARS],
                checks=tuple(checks),
                seconds=time.perf_counter() - start,
            )
            return TorchCandidateResult(result, **memory, **self._memory(), phases=phase.seconds, **kw)

        status, why = screen(job.candidate.source)
        if status is not None:
            return verdict(status, why)
        torch = self.torch
        with torch.no_grad():
            if self.cuda:
                torch.cuda.reset_peak_memory_stats(self.device)
            try:  # trusted: the task; nothing of the answer has run yet
                with phase("task_s"):
                    task = _module(req.task, "task.py")
                    init = list(task["get_init_inputs"]())
                    torch.manual_seed(req.seeds[0])
                    model = task["Model"](*init).to(self.device).eval()
                with phase("reference_s"):
                    cases = self._cases(task, model, req.seeds)
                    self._release()
                with phase("footprint_s"):
                    memory["footprint_bytes"] = self._footprint(model, cases[0])
                prepared = self._prepare(model, cases[0], job.device) if req.time else None
            except Exception as exc:
                msg = f"the task's model failed: {type(exc).__name__}: {exc}"
                return verdict(Status.CRASH, msg, task_error=msg[:MESSAGE_CHARS])
            harness = (sys.modules[__name__], timing, verify)
            guard = Guard(torch, self.device, harness)  # the last moment before any answer code runs
            try:
                with phase("load_s"):  # the answer's module: load_inline loads (or builds), Triton defines
                    answer = _module(job.candidate.source, "answer.py")
                    cls = answer.get("ModelNew")
                    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
                        return verdict(Status.COMPILE_ERROR, "ModelNew is not a torch.nn.Module subclass")
                    torch.manual_seed(req.seeds[0])
                    new = cls(*init).to(self.device).eval()
            except Exception as exc:
                if tampered := self._tampered(guard):
                    return verdict(Status.REJECTED, tampered)
                return verdict(Status.COMPILE_ERROR, f"building ModelNew failed: {_why(exc)}")
            with phase("verify_s"):
                checks, failed, why = self._verify(new, cases, guard)
            if failed is not None:
                return verdict(failed, why, checks=checks)
            if prepared is None:
                return verdict(Status.OK, "verified (not timed)", checks=checks)
            try:
                timed = self._timed(model, new, cases, req, prepared, guard, verdict, checks)
                return replace(timed, **memory, **self._memory(), phases=phase.seconds)
            except Exception as exc:
                return verdict(Status.CRASH, f"while timing: {_why(exc)}", checks=tuple(checks))

    _crash = ""

    def _verify(
        self, new: Any, cases: Sequence[_Case], guard: Guard
    ) -> tuple[tuple[Check, ...], Status | None, str]:
        """The answer on every input set, in order: (the checks, None, '') when every one passed,
        else the checks so far, the verdict and why."""
        torch = self.torch
        checks: list[Check] = []
        held: list[Any] = []  # the answer's outputs on the previous input set, alive
        for i, case in enumerate(cases):
            inputs = case.make()
            check, refusal = self._check(new, inputs, case, guard, case.label, cases[:i], held)
            if refusal:
                return tuple(checks), Status.REJECTED, refusal
            if check is None:
                return tuple(checks), Status.CRASH, f"{case.label} seed {case.seed}: {self._crash}"
            checks.append(check)
            if not check.ok:
                return tuple(checks), Status.MISMATCH, f"{case.label} seed {case.seed}: {check.detail}"
            poison(torch, inputs)
            del inputs
        del held
        self._release()
        return tuple(checks), None, ""

    def _check(
        self,
        new: Any,
        inputs: list[Any],
        case: _Case,
        guard: Guard,
        label: str,
        earlier: Sequence[_Case],
        held: list[Any],
        expected: list[Any] | None = None,
    ) -> tuple[Check | None, str]:
        """The answer on ``inputs`` (which hold ``case``'s inputs): (its check against the
        reference, '') or (None, why it is refused) -- (None, '') when it raised
        (``self._crash`` says what).  A wrong output that is right for one of the ``earlier``
        input sets is a result kept across calls: refused.  So is an output in the storage of
        one of ``held`` (the answer's outputs on the previous set, still alive: no allocation
        can hand their memory out again) -- a buffer the answer keeps and returns on every call,
        a replayed CUDA graph's.  ``held`` becomes this call's outputs.  ``expected``: what
        ``inputs`` held before the call (None: regenerated here)."""
        torch = self.torch
        with self.phases("poison_s"):
            poison_free(torch, self.device, [t.numel() * t.element_size() for t in case.ref])
        try:
            got = outputs_of(new(*inputs))
            late = -1 if isinstance(got, str) else ready(torch, got, self._sync)
        except Exception as exc:
            self._crash = _why(exc)
            return None, self._tampered(guard)  # a crash after tampering is the tampering
        where = f"{label}, seed {case.seed}"
        if tampered := self._tampered(guard):
            return None, tampered
        if isinstance(got, str):
            return Check(label, case.seed, False, detail=got), ""
        own = {x.untyped_storage().data_ptr() for x in inputs if isinstance(x, torch.Tensor)}
        kept = {o.untyped_storage().data_ptr() for o in held if o.numel()} - own  # (a view of an input)
        again = next(
            (i for i, o in enumerate(got) if o.numel() and o.untyped_storage().data_ptr() in kept), -1
        )
        held[:] = got
        if again >= 0:
            return None, (
                f"output {again} on {where} is in the memory of its output on the input set before, "
                "still alive: a result kept from an earlier call"
            )
        if late >= 0:
            return None, (
                f"output {late} was not complete on the caller's stream when forward returned "
                f"({where}): work left running on another stream"
            )
        for i, o in enumerate(got):
            if type(o) not in (torch.Tensor, torch.nn.Parameter):
                return None, f"output {i} is a {type(o).__name__}, a subclass of torch.Tensor ({where})"
            if poisoned(torch, o):
                return None, (
                    f"output {i} was not written ({where}): it holds the pattern the harness "
                    "wrote into memory it freed"
                )
        fresh = case.make() if expected is None else expected
        changed = next(
            (i for i, (a, b) in enumerate(zip(inputs, fresh, strict=True)) if not _same(torch, a, b)), -1
        )
        if expected is None:
            poison(torch, fresh)
        del fresh
        if changed >= 0:
            return None, f"input {changed} was modified ({where})"
        twin: _Case | None = None  # an earlier input set whose output this is
        with self.phases("compare_s"):
            check = compare_outputs(label, case.seed, case.ref, case.moved, got, case.n, self.device)
            if not check.ok:
                twin = next(
                    (
                        o
                        for o in earlier
                        if compare_outputs(label, o.seed, o.ref, o.moved, got, o.n, self.device).ok
                    ),
                    None,
                )
        if twin is not None:
            return None, (
                f"its output on {case.label} seed {case.seed} is its output on {twin.label} seed "
                f"{twin.seed}: a result kept from an earlier call"
            )
        return check, ""

    def _tampered(self, guard: Guard) -> str:
        """What the answer changed of what the evaluation trusts ('' if nothing)."""
        if not pinned(self.torch):
            return "the answer turned TF32 or a lower matmul precision on"
        changed = guard.changed()
        return f"the answer changed torch or the timer: {changed}" if changed else ""

    def _cases(self, task: dict[str, Any], model: Any, seeds: Sequence[int]) -> list[_Case]:
        """The reference's outputs on every input set: ``get_inputs()`` then each set of
        ``get_verify_inputs()``, per seed, and the first seed's benchmark inputs with two
        elements swapped (:func:`_swapped`); kept on the host; every tensor freed on the device
        is poisoned first (:func:`~sandbox.torch_trust.poison`)."""
        torch = self.torch
        params = [*model.parameters(), *model.buffers()]
        cases = []
        for seed in seeds:
            sets: list[tuple[str, Callable[[], Any]]] = [("bench", lambda: [task["get_inputs"]()])]
            if "get_verify_inputs" in task:
                sets.append(("verify", task["get_verify_inputs"]))
            for label, make_all in sets:
                groups = self._inputs(make_all, seed, None)
                count = len(groups)
                poison(torch, [t for g in groups for t in g])
                del groups
                makes = [
                    (label if label == "bench" else f"{label}[{j}]", partial(self._inputs, make_all, seed, j))
                    for j in range(count)
                ]
                if label == "bench" and seed == seeds[0]:
                    makes.append(("swapped", partial(_swapped, torch, makes[0][1])))
                for name, make in makes:
                    inputs = make()
                    ref = outputs_of(model(*inputs))
                    if isinstance(ref, str):
                        raise ValueError(f"the reference's {ref}")
                    with self.phases("to_host_s"):
                        host_ref = _host(ref)
                    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
                    n = reduction_length(tensors, params, ref)
                    poison(torch, ref, keep=[*params, *inputs])
                    del ref
                    nudged = self._perturbed(inputs, seed)
                    moved = cast(list[Any], outputs_of(model(*nudged)))
                    with self.phases("to_host_s"):
                        host_moved = _host(moved)
                    poison(torch, moved, keep=[*params, *inputs, *nudged])
                    poison(torch, [*nudged, *inputs], keep=params)
                    del moved, nudged, inputs, tensors
                    cases.append(_Case(name, seed, make, host_ref, host_moved, n))
        self._sync()
        return cases

    def _inputs(self, make_all: Callable[[], Any], seed: int, j: int | None) -> list[Any]:
        """Input set ``j`` of what ``make_all`` returns under ``seed`` (on the device); None:
        every set (to count them)."""
        torch = self.torch
        torch.manual_seed(seed)
        with torch.device(self.device):
            groups = list(make_all())
        if j is None:
            return groups
        return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in groups[j]]

    def _perturbed(self, inputs: Sequence[Any], seed: int) -> list[Any]:
        """Float inputs with each element scaled by ``1 ± rho`` (signs from ``seed``)."""
        torch = self.torch
        gen = torch.Generator(device=self.device).manual_seed(seed + 104729)
        out = []
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                x = x.clone(memory_format=torch.contiguous_format)
                flat = x.view(-1)
                for at in range(0, flat.numel(), CHUNK):  # in pieces: one more input set, no more
                    piece = flat[at : at + CHUNK]
                    draws = torch.rand(piece.shape, generator=gen, device=x.device)
                    up = draws < 0.5
                    scale = torch.where(up, 1.0 + PERTURBATION, 1.0 - PERTURBATION).to(x.dtype)
                    piece.mul_(scale)
                    poison(torch, [draws, up, scale])  # freed memory the answer's allocations may get
            out.append(x)
        return out

    def _footprint(self, model: Any, case: _Case) -> int:
        """The task's own device memory: its benchmark inputs, outputs and parameters."""
        torch = self.torch
        inputs = case.make()
        size = nbytes(torch, inputs) + nbytes(torch, case.ref)
        poison(torch, inputs)
        return size + nbytes(torch, [*model.parameters(), *model.buffers()])

    def _prepare(self, model: Any, case: _Case, known: DeviceInfo | None) -> _Bench:
        """Before the answer is imported: the clock, the timed inputs, the reference's work (its
        bytes and FLOPs), the device's ceilings (:meth:`_ceilings`) and the reference's time alone."""
        torch = self.torch
        phase = self.phases
        clock = TorchClock(torch, self.device)
        live = case.make()
        with phase("work_s"):
            try:
                counted, outs = work(torch, model, live)
                poison(torch, outs, keep=[*live, *model.parameters(), *model.buffers()])
                del outs
            except Exception as exc:  # an op the flop counter cannot trace: the floor by bytes alone
                log.warning("the flop counter failed on the reference (%s): no FLOP floor", exc)
                counted = Work(nbytes(torch, live) + nbytes(torch, case.ref), 0)
        bandwidth = gflops = 0.0  # 0: that floor is off
        if self.cuda:
            dtypes = {t.dtype for t in [*live, *model.parameters()] if isinstance(t, torch.Tensor)}
            with phase("ceilings_s"):
                bandwidth, gflops = self._ceilings(clock, dtypes, known)
        prepared = _Bench(clock, live, counted, bandwidth, gflops)
        with phase("alone_s"):
            prepared.alone = self._sample(prepared, [lambda _: model(*live)], REFERENCE_BUDGET).timings[0]
            sizes = [t.numel() * t.element_size() for t in [*case.ref, *live] if isinstance(t, torch.Tensor)]
            poison(torch, live)
            prepared.live = live = []  # made again for timing: not held while verifying
            poison_free(torch, self.device, sizes)  # the reference's outputs its lone timing freed
            self._release()
        return prepared

    def _ceilings(self, clock: TorchClock, dtypes: set[Any], known: DeviceInfo | None) -> tuple[float, float]:
        """(copy GB/s, the best GEMM GFLOP/s over the task's float ``dtypes``): the executor's
        measurement of this device (``known``, once per device and driver: fp32 at the pinned
        precision, half types on the tensor cores) where it covers the task's dtypes, else
        measured here, beside the task (:func:`~sandbox.torch_trust.ceilings`)."""
        torch = self.torch
        floats = {d for d in dtypes if d.is_floating_point}
        half = bool(floats & {torch.float16, torch.bfloat16})
        if (
            known is not None
            and known.peak_bandwidth_gbps > 0
            and known.peak_gflops > 0
            and (known.peak_tensor_gflops > 0 or not half)
            and floats <= {torch.float32, torch.float16, torch.bfloat16}
        ):
            return known.peak_bandwidth_gbps, max(
                known.peak_gflops, known.peak_tensor_gflops if half else 0.0
            )
        try:
            return ceilings(torch, self.device, clock, dtypes)
        except torch.cuda.OutOfMemoryError:
            log.warning("no room to measure the device's ceilings beside the task: no physics floor")
            return 0.0, 0.0

    def _sample(self, b: _Bench, calls: Sequence[Callable[[int], Any]], budget: Budget) -> Sampled:
        flusher = Flusher(cast(Runtime, b.clock), self.flush_bytes())
        try:
            return bench(
                cast(Runtime, b.clock), calls, 1, flusher, budget, reset=b.refill, settle=b.clock.settle
            )
        finally:
            flusher.close()

    def _timed(
        self,
        model: Any,
        new: Any,
        cases: Sequence[_Case],
        req: TorchRequest,
        b: _Bench,
        guard: Guard,
        verdict: Callable[..., TorchCandidateResult],
        checks: tuple[Check, ...],
    ) -> TorchCandidateResult:
        """Time ``new`` against eager ``model``, then against ``torch.compile(model)``: each sample
        on fresh inputs (:meth:`_Bench.refill`), ended by a device-wide synchronize.  Then, in
        order: the answer checked again on every seed's inputs in the timed tensors
        (``rejected``: a cache by tensor, work that stops once verified); the reference's time in
        the pairs against its time before the answer was loaded (``rejected``: the answer slowed
        the reference down); the physics floor and, for a speedup of :data:`RETIME_FROM` or more,
        the host clock's agreement (``implausible``)."""
        torch = self.torch
        bench_cases = [c for c in cases if c.label == "bench"]
        b.live, b.scale = bench_cases[0].make(), 1.0

        def honest(what: str) -> str:
            if tampered := self._tampered(guard):  # before the reference runs on the swapped inputs
                return f"{what}: {tampered}"
            rounds = [(case, bench_cases[:i] + bench_cases[i + 1 :]) for i, case in enumerate(bench_cases)]
            rounds += [(case, bench_cases[:1]) for case in cases if case.label == "swapped"]
            held: list[Any] = []
            for case, others in rounds:
                fresh = case.make()
                b.load(fresh)
                check, refusal = self._check(new, b.live, case, guard, "timed", others, held, fresh)
                poison(torch, fresh)
                del fresh
                if refusal:
                    return f"{what}: {refusal}"
                if check is None:
                    return f"{what}: it raised once timed ({self._crash})"
                if not check.ok:
                    return f"{what}: once timed, its output is not the output of its inputs ({check.detail})"
            return ""

        def timed(reference: Callable[[], Any]) -> tuple[list[Timing], tuple[float, float, float], int]:
            sampled = self._sample(b, [lambda _: reference(), lambda _: new(*b.live)], req.budget)
            return sampled.timings, paired(sampled.ratios), len(sampled.ratios)

        phase = self.phases
        with phase("time_s"):
            timings, (speed, low, high), pairs = timed(lambda: model(*b.live))
        with phase("recheck_s"):
            refused = honest("against eager")
        if refused:
            return verdict(Status.REJECTED, refused, checks=checks)
        alone = b.alone.median_ms if b.alone else 0.0
        paired_ref = timings[0].median_ms
        drifted = paired_ref > DRIFT * alone and paired_ref - alone > DRIFT_FLOOR_MS
        if self.cuda and alone > 0 and drifted:  # (the CPU's times follow the host's other load)
            why = (
                f"the reference ran {paired_ref / alone:.2f}x slower beside the answer ({paired_ref:.4g} ms) "
                f"than before the answer was loaded ({alone:.4g} ms): the answer changed the reference"
            )
            return verdict(Status.REJECTED, why, checks=checks)
        result = replace(
            verdict(Status.OK, "verified; timed against eager").result,
            checks=checks,
            timing=timings[1],
            baseline_timing=timings[0],
            speedup=speed,
            speedup_low=low,
            speedup_high=high,
            pairs=pairs,
        )
        with phase("floor_s"):
            result = self._floor(result, b)
        extra: dict[str, Any] = {}
        if (
            self.cuda and result.status is Status.OK and speed >= RETIME_FROM
        ):  # on the CPU both are the host clock
            with phase("wall_s"):
                wall = self._wall(b, new)
            events = timings[1].median_ms
            extra["wall_ms"] = wall
            if wall > WALL_AGREE * events + WALL_SLACK_MS:
                why = (
                    f"implausible: the events measure {events:.4g} ms per call, the host clock "
                    f"{wall:.4g} ms over {WALL_CALLS} calls each ended by a device-wide synchronize "
                    f"(at most {WALL_AGREE:g}x + {WALL_SLACK_MS * 1e3:.0f} us apart): work must have "
                    "escaped the timed region"
                )
                result = replace(result, status=Status.IMPLAUSIBLE, message=why)
        if result.status is not Status.OK:
            return TorchCandidateResult(result, **extra)
        if req.compiled:
            with phase("compiled_s"):
                compiled, note = self._compiled(model, b, guard, timed, honest)
            if isinstance(compiled, str):
                return verdict(Status.REJECTED, compiled, checks=checks)
            extra.update(compiled)
            message = "verified; timed against eager" + (" and torch.compile" if compiled else "")
            result = replace(result, message=message, note=note)
        return TorchCandidateResult(result, **extra)

    def _release(self) -> None:
        """Between phases: the caching allocator's free blocks back to the device (a large task's
        next phase allocates sizes its cached blocks may not fit)."""
        if self.cuda:
            self._sync()
            self.torch.cuda.empty_cache()

    def _memory(self) -> dict[str, Any]:
        if not self.cuda:
            return {}
        return {"peak_memory_bytes": int(self.torch.cuda.max_memory_allocated(self.device))}

    def _compiled(
        self, model: Any, b: _Bench, guard: Guard, timed: Callable[..., Any], honest: Callable[[str], str]
    ) -> tuple[dict[str, Any] | str, str]:
        """The speedup against ``torch.compile(model)`` (fields of the result), or why the answer
        is refused once timed against it; and a note when torch.compile failed.  The guard,
        clean after the eager timing's checks, holds what the compiler's warm-up installed."""
        try:
            fast = self.torch.compile(model)
            fast(*b.live)
        except Exception as exc:
            return {}, f"torch.compile(Model) failed: {_why(exc)}"
        finally:
            guard.recapture()
        c_timings, (c_speed, c_low, c_high), _ = timed(lambda: fast(*b.live))
        if refused := honest("against torch.compile"):
            return refused, ""
        return {
            "compiled_speedup": c_speed,
            "compiled_speedup_low": c_low,
            "compiled_speedup_high": c_high,
            "compiled_timing": c_timings[0],
        }, ""

    def _floor(self, result: CandidateResult, b: _Bench) -> CandidateResult:
        """``result`` with its throughput for the reference's work against the device's measured
        ceilings, ``implausible`` beyond them (:func:`sandbox.timing.implausible`); the bytes
        counted are the reference's inputs, outputs and parameters less one L2 (writes the cache
        still holds when the sample ends).  A floor the
        reference itself breaks (a FLOP count above what the library executes: Winograd, FFT; an
        output that is a view of an input) is not applied."""
        if not self.cuda or result.timing is None or result.timing.median_ms <= 0:
            return result
        # up to an L2's worth of the traffic (the last writes) may still sit in the cache at the end
        nbytes_, flops = max(0, b.work.nbytes - self.describe().l2_bytes), b.work.flops
        alone = b.alone.median_ms * 1e-3 if b.alone else 0.0
        if alone > 0 and flops / alone / 1e9 > b.gflops * PLAUSIBLE_PCT / 100:
            flops = 0
        if alone > 0 and nbytes_ / alone / 1e9 > b.bandwidth_gbps * PLAUSIBLE_PCT / 100:
            nbytes_ = 0  # the reference moves less than its inputs and outputs (a view, a cached value)
        seconds = result.timing.median_ms * 1e-3
        gbps, gflops = nbytes_ / seconds / 1e9, flops / seconds / 1e9
        measured = replace(
            result,
            achieved_gbps=gbps,
            achieved_gflops=gflops,
            pct_peak_bandwidth=percent_of_peak(gbps, b.bandwidth_gbps),
            pct_peak_flops=percent_of_peak(gflops, b.gflops),
        )
        why = implausible(measured)
        return replace(measured, status=Status.IMPLAUSIBLE, message=why) if why else measured

    def _wall(self, b: _Bench, new: Any) -> float:
        """The answer's median host-clock time per call (:func:`~sandbox.torch_trust.wall_ms`)."""
        flusher = Flusher(cast(Runtime, b.clock), self.flush_bytes())
        try:

            def prepare() -> None:
                b.refill(0)
                flusher.flush()

            return wall_ms(b.clock, prepare, lambda: new(*b.live), WALL_CALLS)
        finally:
            flusher.close()

    def __call__(self, job: Any) -> Any:
        if isinstance(job, InfoJob):
            return Reply(self.describe())
        if not isinstance(job, TorchJob):
            return Reply(None, unavailable="a PyTorch worker serves PyTorch jobs only")
        return Reply(self.evaluate(job))


def _swapped(torch: Any, make: Callable[[], list[Any]]) -> list[Any]:
    """The inputs ``make`` gives but for two elements of the first float input swapped: the same
    shape, sum and nearly every element (what a cheap fingerprint of the inputs cannot tell
    apart), a different output for most tasks."""
    inputs = make()
    x = next((t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()), None)
    if x is not None and x.numel() >= 3:
        flat = x.view(-1)
        i, j = flat.numel() // 3, 2 * flat.numel() // 3
        flat[i], flat[j] = flat[j].clone(), flat[i].clone()
    return inputs


def _host(tensors: Sequence[Any]) -> list[Any]:
    """Copies on the host (never the tensors themselves: the device's are poisoned)."""
    return [t.detach().to("cpu", copy=True) for t in tensors]


def _same(torch: Any, a: Any, b: Any) -> bool:
    """Whether an input still holds the bytes it held (not a tensor: yes)."""
    return not isinstance(a, torch.Tensor) or same_bytes(torch, a, b)
