"""KernelBench-format (PyTorch) evaluation, on the sandbox's side of the boundary.

A task is Python defining ``class Model(torch.nn.Module)``, ``get_inputs()``,
``get_init_inputs()`` and optionally ``get_verify_inputs()`` (further input sets: other sizes);
an answer is Python defining ``class ModelNew(torch.nn.Module)``, usually with a CUDA kernel built
by ``torch.utils.cpp_extension.load_inline``.  Task code is trusted (the server's own files); the
answer is not, and it only ever runs here: :class:`TorchHandler` serves one :class:`TorchJob` in a
GPU worker process of its own (``sandbox.local.LocalExecutor.evaluate_torch`` starts a fresh one
per candidate, with the GPU workers' isolation: ``bwrap``, clean environment, own process group,
killed at the deadline; a crash, a hang or an exception is that candidate's verdict).

Per candidate, in order:

1. the answer is screened (:func:`screen`): imports only of torch and a few standard modules, no
   ``exec``/``open``/``getattr``..., no dunder names or attributes but ``__init__``, no assignment
   to an attribute but ``self.NAME`` (patching torch, the timer, the reference) -- ``rejected``;
2. before any answer code runs, the reference ``Model`` (weights seeded) computes its outputs on
   fresh inputs per seed (``get_inputs()`` seeded, and each set of ``get_verify_inputs()``), and
   on the same inputs perturbed by ``1 ± rho`` (the calibration of ``sandbox.verify``'s tolerance
   model: the bound follows fp32 roundoff, the reduction length and the reference's scale and
   sensitivity);
3. ``ModelNew`` is built with the same init inputs and the same seed; fp32 stays fp32 (TF32 off
   for matmul and cuDNN, ``highest`` matmul precision) and an answer that changes that is
   ``rejected``;
4. each input set: outputs compared by :func:`sandbox.verify.compare` (shapes and dtypes must
   match, NaN/Inf in the same places, elementwise and norm bounds, a constant output where the
   reference varies refused) -- ``mismatch``; inputs must hold the bytes they held -- ``rejected``;
5. timing (``sandbox.timing.bench``: CUDA events, each round of samples queued behind a spinning
   kernel, the L2 flushed before every sample, eager and
   ``ModelNew`` in interleaved pairs, median and quartiles of the paired ratios), then again
   against ``torch.compile(Model)``; before every sample the timed input tensors are refilled in
   place with the next seed's inputs; afterwards, refilled with each seed's inputs in turn, the
   answer's output must be that seed's output and the inputs intact (an answer that caches outputs
   by tensor, or stops working once verified, is ``rejected``; this needs two seeds or more).
"""

from __future__ import annotations

import ast
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np

from sandbox.contract import (
    CandidateResult,
    Check,
    DeviceInfo,
    Status,
    Timing,
    TorchCandidateResult,
    TorchRequest,
)
from sandbox.runtime import Runtime
from sandbox.timing import Flusher, Gate, bench, paired
from sandbox.verify import PERTURBATION, Agreement, Calibration, checked, compare
from sandbox.wire import InfoJob, Reply, TorchJob

TORCH_HANDLER = "sandbox.torch_eval:TorchHandler"
# on top of the budget's timeout: importing torch, load_inline's nvcc, torch.compile
BUILD_ALLOWANCE_S = 180.0
ALLOWED_MODULES = frozenset(
    {
        "torch",
        "math",
        "typing",
        "functools",
        "itertools",
        "collections",
        "dataclasses",
        "numbers",
        "__future__",
    }
)
FORBIDDEN_NAMES = frozenset(
    {
        "exec",
        "eval",
        "compile",
        "open",
        "__import__",
        "globals",
        "locals",
        "vars",
        "getattr",
        "setattr",
        "delattr",
        "breakpoint",
        "memoryview",
    }
)
MESSAGE_CHARS = 600


# --------------------------------------------------------------------------- the screen (no torch)


def screen(source: str) -> tuple[Status | None, str]:
    """Whether an answer may run: (None, "") or the status and why not (a syntax error is a
    ``compile_error``; a construct that reaches past ``ModelNew`` is ``rejected``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return Status.COMPILE_ERROR, f"syntax error, line {exc.lineno}: {exc.msg}"
    except ValueError as exc:  # NUL bytes
        return Status.COMPILE_ERROR, f"not Python source: {exc}"
    for node in ast.walk(tree):
        why = _refusal(node)
        if why:
            return Status.REJECTED, f"refused: {why} (line {getattr(node, 'lineno', 0)})"
    defines = any(isinstance(n, ast.ClassDef) and n.name == "ModelNew" for n in tree.body)
    if not defines:
        return Status.COMPILE_ERROR, "no class ModelNew is defined at the top level"
    return None, ""


def _refusal(node: ast.AST) -> str:
    if isinstance(node, ast.Import):
        bad = [a.name for a in node.names if a.name.partition(".")[0] not in ALLOWED_MODULES]
        return f"import of {bad[0]}" if bad else ""
    if isinstance(node, ast.ImportFrom):
        if node.level or (node.module or "").partition(".")[0] not in ALLOWED_MODULES:
            return f"import from {'.' * node.level}{node.module or ''}"
        return ""
    if isinstance(node, ast.Name) and (node.id in FORBIDDEN_NAMES or node.id.startswith("__")):
        return f"use of {node.id}"
    if isinstance(node, ast.Attribute) and node.attr.startswith("__") and node.attr != "__init__":
        return f"attribute {node.attr}"
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign | ast.Delete):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    for t in targets:
        if (foreign := _foreign(t)) is not None:
            return f"assignment to {ast.unparse(foreign)[:80]} (only to names and to self.NAME)"
    return ""


def _foreign(target: ast.expr) -> ast.expr | None:
    """The part of an assignment target that sets an attribute of something but ``self`` itself
    (``torch.x``, ``self.m.x``: patching a module or the timer), else None.  Items of a name or of
    ``self.NAME`` may be set."""
    if isinstance(target, ast.Tuple | ast.List):
        return next((bad for e in target.elts if (bad := _foreign(e)) is not None), None)
    if isinstance(target, ast.Starred):
        return _foreign(target.value)
    node = target
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute) and not (isinstance(node.value, ast.Name) and node.value.id == "self"):
        return node
    return None


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


def compare_outputs(
    label: str, seed: int, ref: Sequence[Any], moved: Sequence[Any], got: Sequence[Any], n: int
) -> Check:
    """``got`` against the reference's outputs ``ref`` (``moved``: on perturbed inputs): the same
    count, shapes and dtypes, then :func:`sandbox.verify.compare` per output."""
    if len(got) != len(ref):
        return Check(label, seed, False, detail=f"{len(got)} outputs where the reference has {len(ref)}")
    worst: Check | None = None
    for i, (r, m, g) in enumerate(zip(ref, moved, got, strict=True)):
        arg = f"output {i}"
        if tuple(g.shape) != tuple(r.shape) or g.dtype != r.dtype:
            detail = f"{arg} is {g.dtype} {tuple(g.shape)}, the reference's {r.dtype} {tuple(r.shape)}"
            return Check(label, seed, False, arg=arg, detail=detail)
        if g.device != r.device:
            return Check(label, seed, False, arg=arg, detail=f"{arg} is on {g.device}, not {r.device}")
        calib = Calibration(perturbed=raw(m), rho=PERTURBATION, n=n)  # compare moves it where ``ref`` is
        cmp: Agreement = compare(raw(r), raw(g), dtype_name(r), calib)
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


# --------------------------------------------------------------------------- timing


class TorchClock:
    """What :func:`sandbox.timing.bench` and its :class:`~sandbox.timing.Flusher` use of a
    :class:`~sandbox.runtime.Runtime`, over torch: CUDA events on a GPU, the host clock on the CPU
    (where every call returns when its work is done)."""

    def __init__(self, device: Any) -> None:
        self.torch = _torch()
        self.device = device
        self.cuda = device.type == "cuda"
        self._buffers: dict[int, Any] = {}

    def event(self) -> Any:
        return self.torch.cuda.Event(enable_timing=True) if self.cuda else [0.0]

    def record(self, event: Any) -> None:
        if self.cuda:
            event.record()
        else:
            event[0] = time.perf_counter()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(start.elapsed_time(end)) if self.cuda else (end[0] - start[0]) * 1e3

    def synchronize(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def alloc(self, nbytes: int) -> int:
        buf = self.torch.empty(nbytes, dtype=self.torch.uint8, device=self.device)
        self._buffers[buf.data_ptr()] = buf
        return int(buf.data_ptr())

    def memset_async(self, ptr: int, byte: int, nbytes: int) -> None:
        self._buffers[ptr][:nbytes].fill_(byte)

    def free(self, ptr: int) -> None:
        self._buffers.pop(ptr, None)


GATE_CYCLES = 20_000_000  # about 10 ms at boost clock: longer than the host takes to enqueue a round


class SleepGate:
    """:class:`sandbox.timing.Gate` over torch: a spinning kernel (``torch.cuda._sleep``) queued
    before each round of samples, so the round is enqueued behind it and a host hiccup (another
    process compiling) does not stretch a sample.  It opens by itself after ``GATE_CYCLES``."""

    def __init__(self) -> None:
        self.torch = _torch()

    def close(self) -> None:
        self.torch.cuda._sleep(GATE_CYCLES)

    def open(self) -> None:
        pass


# --------------------------------------------------------------------------- the handler


def _torch() -> Any:
    import torch

    return torch


def _module(source: str, filename: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": filename.removesuffix(".py")}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


def _why(exc: BaseException) -> str:
    """An exception in one line, where in the answer it was raised first."""
    where = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == "answer.py"]
    at = f" (answer line {where[-1].lineno})" if where else ""
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}{at}"[
        :MESSAGE_CHARS
    ]


@dataclass
class _Case:
    label: str
    seed: int
    inputs: list[Any]
    kept: list[Any]  # the inputs' bytes before the candidate ran
    ref: list[Any]
    moved: list[Any]
    n: int

    def changed(self) -> int:
        """The first input that no longer holds the bytes it held (-1: none)."""
        return next(
            (i for i, (a, b) in enumerate(zip(self.inputs, self.kept, strict=True)) if not _same(a, b)), -1
        )


class TorchHandler:
    """Serves :class:`TorchJob` s (and device descriptions) in a worker process; ``backend``
    ``cpu`` runs on the host (tests), anything else on CUDA device ``device``."""

    def __init__(self, device: int, backend: str) -> None:
        torch = _torch()
        self.torch = torch
        if backend == "cpu":
            self.device = torch.device("cpu")
        else:
            if not torch.cuda.is_available():
                raise RuntimeError("torch sees no CUDA device")
            self.device = torch.device("cuda", device)
            torch.cuda.set_device(self.device)
        os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(tempfile.gettempdir(), "torch-extensions"))
        self._pin()

    def _pin(self) -> None:
        torch = self.torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")

    def _pinned(self) -> bool:
        torch = self.torch
        return (
            not torch.backends.cuda.matmul.allow_tf32
            and not torch.backends.cudnn.allow_tf32
            and torch.get_float32_matmul_precision() == "highest"
        )

    def describe(self) -> DeviceInfo:
        torch = self.torch
        if self.device.type != "cuda":
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

    def evaluate(self, job: TorchJob) -> TorchCandidateResult:
        start = time.perf_counter()
        cid, req = job.candidate.id, job.request

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
            return TorchCandidateResult(result, **kw)

        status, why = screen(job.candidate.source)
        if status is not None:
            return verdict(status, why)
        torch = self.torch
        with torch.no_grad():
            try:  # trusted: the task; nothing of the answer has run yet
                task = _module(req.task, "task.py")
                init = list(task["get_init_inputs"]())
                torch.manual_seed(req.seeds[0])
                model = task["Model"](*init).to(self.device).eval()
                cases = self._cases(task, model, req.seeds)
            except Exception as exc:
                msg = f"the task's model failed: {type(exc).__name__}: {exc}"
                return verdict(Status.CRASH, msg, task_error=msg[:MESSAGE_CHARS])
            try:
                answer = _module(job.candidate.source, "answer.py")
                cls = answer.get("ModelNew")
                if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
                    return verdict(Status.COMPILE_ERROR, "ModelNew is not a torch.nn.Module subclass")
                torch.manual_seed(req.seeds[0])
                new = cls(*init).to(self.device).eval()
            except Exception as exc:
                return verdict(Status.COMPILE_ERROR, f"building ModelNew failed: {_why(exc)}")
            checks: list[Check] = []
            for case in cases:
                try:
                    got = outputs_of(new(*case.inputs))
                    self._sync()
                except Exception as exc:
                    return verdict(
                        Status.CRASH, f"{case.label} seed {case.seed}: {_why(exc)}", checks=tuple(checks)
                    )
                if not self._pinned():
                    return verdict(Status.REJECTED, "the answer turned TF32 or a lower matmul precision on")
                if (changed := case.changed()) >= 0:
                    msg = f"input {changed} modified ({case.label}, seed {case.seed})"
                    return verdict(Status.REJECTED, msg, checks=tuple(checks))
                check = (
                    Check(case.label, case.seed, False, detail=got)
                    if isinstance(got, str)
                    else compare_outputs(case.label, case.seed, case.ref, case.moved, got, case.n)
                )
                checks.append(check)
                if not check.ok:
                    return verdict(
                        Status.MISMATCH,
                        f"{case.label} seed {case.seed}: {check.detail}",
                        checks=tuple(checks),
                    )
            if not req.time:
                return verdict(Status.OK, "verified (not timed)", checks=tuple(checks))
            try:
                return self._timed(model, new, cases, req, verdict, tuple(checks))
            except Exception as exc:
                return verdict(Status.CRASH, f"while timing: {_why(exc)}", checks=tuple(checks))

    def _cases(self, task: dict[str, Any], model: Any, seeds: Sequence[int]) -> list[_Case]:
        """The reference's outputs on every input set: ``get_inputs()`` then each set of
        ``get_verify_inputs()``, per seed (the bench inputs of the first seed are timed)."""
        torch = self.torch
        params = list(model.parameters())
        cases = []
        for seed in seeds:
            sets: list[tuple[str, Callable[[], Any]]] = [("bench", lambda: [task["get_inputs"]()])]
            if "get_verify_inputs" in task:
                sets.append(("verify", task["get_verify_inputs"]))
            for label, make in sets:
                torch.manual_seed(seed)
                with torch.device(self.device):
                    groups = make()
                for j, group in enumerate(groups):
                    inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in group]
                    ref = outputs_of(model(*inputs))
                    if isinstance(ref, str):
                        raise ValueError(f"the reference's {ref}")
                    moved = outputs_of(model(*self._perturbed(inputs, seed)))
                    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
                    cases.append(
                        _Case(
                            label if label == "bench" else f"{label}[{j}]",
                            seed,
                            inputs,
                            [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs],
                            ref,
                            cast(list[Any], moved),
                            reduction_length(tensors, params, ref),
                        )
                    )
        self._sync()
        return cases

    def _perturbed(self, inputs: Sequence[Any], seed: int) -> list[Any]:
        """Float inputs with each element scaled by ``1 ± rho`` (signs from ``seed``)."""
        torch = self.torch
        gen = torch.Generator(device=self.device).manual_seed(seed + 104729)
        out = []
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                up = torch.rand(x.shape, generator=gen, device=x.device) < 0.5
                x = x * torch.where(up, 1.0 + PERTURBATION, 1.0 - PERTURBATION).to(x.dtype)
            out.append(x)
        return out

    def _timed(
        self,
        model: Any,
        new: Any,
        cases: Sequence[_Case],
        req: TorchRequest,
        verdict: Callable[..., TorchCandidateResult],
        checks: tuple[Check, ...],
    ) -> TorchCandidateResult:
        """Time ``new`` against eager ``model``, then against ``torch.compile(model)``.  Before
        every sample the timed input tensors are refilled, in place, with the next seed's benchmark
        inputs (outside the timed region); after each timing, :func:`honest` checks the answer on
        every seed's inputs in those same tensors, which an output cached by tensor (pointer,
        shape) fails."""
        torch = self.torch
        sets = [c for c in cases if c.label == "bench"]
        live = [x.clone() if isinstance(x, torch.Tensor) else x for x in sets[0].inputs]
        at = [0]  # which set ``live`` holds

        def refill_with(case: _Case) -> None:
            for dst, src in zip(live, case.inputs, strict=True):
                if isinstance(dst, torch.Tensor):
                    dst.copy_(src)

        def refill(_: int) -> None:
            at[0] = (at[0] + 1) % len(sets)
            refill_with(sets[at[0]])

        def honest(what: str) -> TorchCandidateResult | None:
            """After timing: the timed tensors refilled with each seed's inputs in turn, the
            answer's output must be that seed's output (a cached one fits at most one seed) and
            the inputs intact."""
            for case in sets:
                refill_with(case)
                got = outputs_of(new(*live))
                check = (
                    Check("timed", case.seed, False, detail=got)
                    if isinstance(got, str)
                    else compare_outputs("timed", case.seed, case.ref, case.moved, got, case.n)
                )
                if not check.ok:
                    why = f"{what}: once timed, its output is not the output of its inputs ({check.detail})"
                    return verdict(Status.REJECTED, why, checks=checks)
                changed = next(
                    (i for i, (a, b) in enumerate(zip(live, case.inputs, strict=True)) if not _same(a, b)), -1
                )
                if changed >= 0:
                    return verdict(
                        Status.REJECTED, f"{what}: input {changed} modified while timed", checks=checks
                    )
            return None

        def timed(reference: Callable[[], Any]) -> tuple[list[Timing], tuple[float, float, float], int]:
            flusher = Flusher(cast(Runtime, clock), self.flush_bytes())
            try:
                sampled = bench(
                    cast(Runtime, clock),
                    [lambda _: reference(), lambda _: new(*live)],
                    1,
                    flusher,
                    req.budget,
                    reset=refill,
                    gate=cast(Gate, SleepGate()) if clock.cuda and hasattr(torch.cuda, "_sleep") else None,
                )
            finally:
                flusher.close()
            return sampled.timings, paired(sampled.ratios), len(sampled.ratios)

        clock = TorchClock(self.device)
        timings, (speed, low, high), pairs = timed(lambda: model(*live))
        if refused := honest("against eager"):
            return refused
        compiled: dict[str, Any] = {}
        note = ""
        fast = None
        if req.compiled:
            try:
                fast = torch.compile(model)
                fast(*live)
            except Exception as exc:
                note = f"torch.compile(Model) failed: {_why(exc)}"
                fast = None
        if fast is not None:
            c_timings, (c_speed, c_low, c_high), _ = timed(lambda: fast(*live))
            if refused := honest("against torch.compile"):
                return refused
            compiled = {
                "compiled_speedup": c_speed,
                "compiled_speedup_low": c_low,
                "compiled_speedup_high": c_high,
                "compiled_timing": c_timings[0],
            }
        message = "verified; timed against eager" + (" and torch.compile" if compiled else "")
        result = replace(
            verdict(Status.OK, message).result,
            checks=checks,
            timing=timings[1],
            baseline_timing=timings[0],
            speedup=speed,
            speedup_low=low,
            speedup_high=high,
            pairs=pairs,
            note=note,
        )
        return TorchCandidateResult(result, **compiled)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            self.torch.cuda.synchronize(self.device)

    def __call__(self, job: Any) -> Any:
        if isinstance(job, InfoJob):
            return Reply(self.describe())
        if not isinstance(job, TorchJob):
            return Reply(None, unavailable="a PyTorch worker serves PyTorch jobs only")
        return Reply(self.evaluate(job))


def _same(a: Any, b: Any) -> bool:
    """Whether an input still holds the bytes it held (NaN payloads included; not a tensor: yes)."""
    torch = _torch()
    if not isinstance(a, torch.Tensor):
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))
