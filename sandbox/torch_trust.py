"""What the PyTorch evaluation trusts, held out of the answer's reach (the worker's side; torch).

An answer's Python shares the interpreter with the timer, and a ``load_inline``, Triton or CuTe
kernel is native code in the same process.  The screen (:mod:`sandbox.screen`) keeps Python
inside the answer's own objects; this module holds what does not depend on the screen:

- :class:`TorchClock`: the timer, built before any answer code is imported, calling the event,
  synchronize and clock functions it captured then (closures over the objects themselves, never
  attribute look-ups on torch at the time of the call); a sample ends with a device-wide
  synchronize, so work on any stream (streams the answer creates, library handles on other
  streams, CUDA graphs it replays, work still running when ``forward`` returns) is inside it;
- :class:`Guard`: the public functions and classes of the torch modules the reference and the
  timer run through, of ``time`` and of the harness's own modules, the current stream, the global hook registries, the torch
  function and dispatch mode stacks and torch's global switches (deterministic algorithms,
  cuDNN, reduced-precision reductions, default dtype), as they were before the answer was
  imported; after the answer ran, anything changed is a ``rejected`` verdict;
- :func:`ready`: an output must be complete on the caller's stream when ``forward`` returns (a
  copy enqueued there right away holds what the output holds once the device is idle);
- :data:`POISON`: memory the harness frees (the reference's outputs, perturbed copies) is
  overwritten first, and an answer whose output holds that pattern did not write it;
- :func:`work` (the reference's bytes and FLOPs: ``FlopCounterMode``) and :func:`ceilings`
  (measured copy bandwidth and GEMM rate at the pinned precision): the physics floor;
- :func:`wall_ms`: the independent re-timing (host clock over many calls ending in a
  device-wide synchronize).

What is left open (native code can patch the process's memory, the driver's entry points or the
clock it reads) is bounded by checks that do not run through anything the answer can reach
before it is loaded: the reference's time measured before the answer was imported against its
time in the pairs (a slowed reference is ``rejected``), the physics floor and the wall-clock
agreement (``implausible``), and outputs checked on fresh inputs after timing.
"""

from __future__ import annotations

import sys
import time
import types
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

POISON = 0x7FC0DEAD  # a quiet NaN with a payload no arithmetic produces (as float32)
HOOK_REGISTRIES = (
    "_global_forward_hooks",
    "_global_forward_pre_hooks",
    "_global_backward_hooks",
    "_global_backward_pre_hooks",
    "_global_forward_hooks_always_called",
    "_global_buffer_registration_hooks",
    "_global_module_registration_hooks",
    "_global_parameter_registration_hooks",
)


class TorchClock:
    """:class:`sandbox.timing.Flusher`'s runtime and :func:`sandbox.timing.bench`'s clock over
    torch, with every function it calls captured at construction (before the answer is
    imported): CUDA events on a GPU, the host clock on the CPU (where every call returns when its
    work is done).  :meth:`settle` is the device-wide synchronize that ends each sample."""

    def __init__(self, torch: Any, device: Any) -> None:
        self.torch = torch
        self.device = device
        self.cuda = device.type == "cuda"
        self._perf = time.perf_counter
        self._empty = torch.empty
        self._uint8 = torch.uint8
        if self.cuda:
            self._event = torch.cuda.Event
            self._record = torch.cuda.Event.record
            self._elapsed = torch.cuda.Event.elapsed_time
            self._device_sync = torch.cuda.synchronize
        self._buffers: dict[int, Any] = {}

    def event(self) -> Any:
        return self._event(enable_timing=True) if self.cuda else [0.0]

    def record(self, event: Any) -> None:
        if self.cuda:
            self._record(event)
        else:
            event[0] = self._perf()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return float(self._elapsed(start, end)) if self.cuda else (end[0] - start[0]) * 1e3

    def synchronize(self) -> None:
        if self.cuda:
            self._device_sync(self.device)

    settle = synchronize  # every stream of the device, not only the current one

    def now(self) -> float:
        return float(self._perf())

    def alloc(self, nbytes: int) -> int:
        buf = self._empty(nbytes, dtype=self._uint8, device=self.device)
        self._buffers[buf.data_ptr()] = buf
        return int(buf.data_ptr())

    def memset_async(self, ptr: int, byte: int, nbytes: int) -> None:
        self._buffers[ptr][:nbytes].fill_(byte)

    def free(self, ptr: int) -> None:
        buf = self._buffers.pop(ptr, None)
        if buf is not None:
            poison(self.torch, [buf])


def _watched(torch: Any) -> list[tuple[str, Any]]:
    import time as clock_module

    return [
        ("torch", torch),
        ("torch.cuda", torch.cuda),
        ("torch.nn.functional", torch.nn.functional),
        ("torch.linalg", torch.linalg),
        ("torch.fft", torch.fft),
        ("torch.special", torch.special),
        ("torch.Tensor", torch.Tensor),
        ("torch.nn.Module", torch.nn.Module),
        ("torch.cuda.Event", torch.cuda.Event),
        ("torch.cuda.Stream", torch.cuda.Stream),
        ("time", clock_module),
    ]


def _held(owner: Any, private: bool = False) -> dict[str, Any]:
    """What of ``owner`` is watched: a class's every callable attribute, a module's public
    functions, classes and submodules (``private``: its private ones too)."""
    found = {}
    for name, value in list(vars(owner).items()):
        if isinstance(owner, types.ModuleType) and name.startswith("_") and not private:
            continue
        if callable(value) or isinstance(value, types.ModuleType | classmethod | staticmethod | property):
            found[name] = value
    return found


class Guard:
    """The objects the reference, the comparison and the timer run through, captured before the
    answer is imported (:meth:`changed` names the first one the answer replaced); ``harness``:
    the evaluation's own modules, whose globals the timer and the comparison look up."""

    def __init__(self, torch: Any, device: Any, harness: Sequence[types.ModuleType] = ()) -> None:
        self.torch = torch
        self.device = device
        self.cuda = device.type == "cuda"
        mine = [sys.modules[__name__], *harness]  # the timer's and the comparison's own modules
        self.owners = _watched(torch) + [(m.__name__, m) for m in mine]
        self.private = {m.__name__ for m in mine}  # watched with their private names
        self.recapture()

    def recapture(self) -> None:
        """Hold everything as it is now (after trusted code changed it: ``torch.compile``'s
        warm-up; never while answer code may have run since the last :meth:`changed`)."""
        torch = self.torch
        device = self.device
        self.held = {label: _held(owner, label in self.private) for label, owner in self.owners}
        self.stream = torch.cuda.current_stream(device) if self.cuda else None
        self.hooks = {name: len(getattr(torch.nn.modules.module, name, {})) for name in HOOK_REGISTRIES}
        self.modes = self._modes()
        self.settings = self._settings()

    def _settings(self) -> dict[str, Any]:
        """torch's global switches that change how the reference computes or how fast."""
        t = self.torch
        return {
            "deterministic algorithms": t.are_deterministic_algorithms_enabled(),
            "cudnn.enabled": t.backends.cudnn.enabled,
            "cudnn.benchmark": t.backends.cudnn.benchmark,
            "cudnn.deterministic": t.backends.cudnn.deterministic,
            "fp16 reduced-precision reduction": t.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "bf16 reduced-precision reduction": t.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "default dtype": t.get_default_dtype(),
            "grad mode": t.is_grad_enabled(),
        }

    def _modes(self) -> tuple[int, int]:
        c = self.torch._C
        return int(c._len_torch_function_stack()), int(c._len_torch_dispatch_stack())

    def changed(self) -> str:
        """'' when everything is as captured, else what the answer changed (one line)."""
        for label, owner in self.owners:
            now = vars(owner)
            for name, value in self.held[label].items():
                if now.get(name) is not value:
                    return f"{label}.{name} was replaced"
        for name, count in self.hooks.items():
            if len(getattr(self.torch.nn.modules.module, name, {})) != count:
                return f"a global module hook was registered ({name})"
        if self._modes() != self.modes:
            return "a torch function or dispatch mode was left active"
        now = self._settings()
        if changed := [k for k, v in self.settings.items() if now[k] != v]:
            return f"torch's global setting {changed[0]} was changed"
        if self.stream is not None and self.torch.cuda.current_stream(self.stream.device) != self.stream:
            return "the current CUDA stream was changed"
        return ""


def pinned(torch: Any) -> bool:
    """Whether fp32 is still fp32 (TF32 off for matmul and cuDNN, ``highest`` matmul precision)."""
    return (
        not torch.backends.cuda.matmul.allow_tf32
        and not torch.backends.cudnn.allow_tf32
        and torch.get_float32_matmul_precision() == "highest"
    )


def pin(torch: Any) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


# --------------------------------------------------------------------------- outputs


def ready(torch: Any, outputs: Sequence[Any], synchronize: Callable[[], None]) -> int:
    """The first output not complete on the caller's stream when ``forward`` returned (-1: all
    are): a copy of each is enqueued on the current stream at once, and once the device is idle
    it must hold what the output holds.  Work the answer left on another stream, unjoined, is
    still running when the copy reads (or has not started)."""
    copies = [o.detach().clone() for o in outputs]
    synchronize()
    for i, (o, c) in enumerate(zip(outputs, copies, strict=True)):
        if not same_bytes(torch, o, c):
            return i
    return -1


def same_bytes(torch: Any, a: Any, b: Any) -> bool:
    """Whether two tensors hold the same bytes (NaN payloads included); compared in pieces of
    :data:`SAME_PIECE` bytes (``torch.equal`` allocates a flag per element it compares)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    x, y = _bytes(torch, a), _bytes(torch, b)
    return all(
        torch.equal(x[at : at + SAME_PIECE], y[at : at + SAME_PIECE])
        for at in range(0, max(1, x.numel()), SAME_PIECE)
    )


SAME_PIECE = 1 << 26  # bytes


def _bytes(torch: Any, t: Any) -> Any:
    return t.detach().contiguous().reshape(-1).view(torch.uint8)


def poison(torch: Any, tensors: Iterable[Any], keep: Iterable[Any] = ()) -> None:
    """Overwrite ``tensors`` (about to be freed) with :data:`POISON`, sparing any that shares
    storage with one of ``keep`` (an output that is a view of an input or a parameter)."""
    kept = {t.untyped_storage().data_ptr() for t in keep if isinstance(t, torch.Tensor)}
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.untyped_storage().data_ptr() in kept or t.numel() == 0:
            continue
        if not t.is_contiguous():  # a view: its storage is someone else's
            continue
        raw = t.detach().reshape(-1).view(torch.uint8)
        if raw.numel() % 4 == 0:
            raw.view(torch.int32).fill_(POISON)
        else:
            raw.fill_(0xAD)


def poisoned(torch: Any, t: Any) -> bool:
    """Whether ``t`` holds a whole :data:`POISON` word: memory the harness overwrote before
    freeing it, returned without being written."""
    raw = _bytes(torch, t)
    if raw.numel() < 4 or raw.numel() % 4:
        return False
    try:
        words = raw.view(torch.int32)
    except RuntimeError:  # a byte view at an offset no word view can start from
        words = raw.clone().view(torch.int32)
    return bool((words == POISON).any())


class _Raw:
    """Device memory at ``address`` as a ``__cuda_array_interface__`` of int32 words (a tensor
    over it with :func:`torch.as_tensor`, no copy)."""

    def __init__(self, address: int, words: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (words,),
            "typestr": "<i4",
            "data": (address, False),
            "version": 3,
        }


def free_blocks(torch: Any, index: int) -> list[tuple[int, int]]:
    """(address, bytes) of every block the caching allocator holds free on GPU ``index``: what
    an allocation may be handed without the driver being asked (the snapshot lists a segment's
    blocks in address order from its start)."""
    found = []
    for segment in torch.cuda.memory_snapshot():
        if segment.get("device") != index:
            continue
        at = int(segment["address"])
        for block in segment["blocks"]:
            at = int(block.get("address", at))
            if block["state"] == "inactive":
                found.append((at, int(block["size"])))
            at += int(block["size"])
    return found


def poison_free(torch: Any, device: Any, sizes: Iterable[int] = ()) -> None:
    """Before an answer's call: a free block of each of ``sizes`` bytes (its outputs') in the
    caching allocator, and every free block overwritten with :data:`POISON`, so an output the
    answer allocates and never writes holds the pattern (:func:`poisoned`) whatever the
    allocator hands it -- not the reference's outputs, nor anything else left in memory."""
    if device.type != "cuda":
        return
    index = device.index if device.index is not None else torch.cuda.current_device()
    held = []
    for size in sorted(set(sizes), reverse=True):
        try:
            held.append(torch.empty(size, dtype=torch.uint8, device=device))
        except torch.cuda.OutOfMemoryError:
            break
    del held
    torch.cuda.synchronize(device)  # no freed block still has work pending on it
    for address, size in free_blocks(torch, index):
        if size >= 4 and address % 4 == 0:
            torch.as_tensor(_Raw(address, size // 4), device=device).fill_(POISON)
    torch.cuda.synchronize(device)


# --------------------------------------------------------------------------- the physics floor


@dataclass(frozen=True)
class Work:
    """What the reference must do at the timed size: bytes it must move at least (its inputs,
    outputs and parameters) and the FLOPs PyTorch's flop counter finds in it."""

    nbytes: int
    flops: int


def nbytes(torch: Any, values: Iterable[Any]) -> int:
    return sum(int(t.numel()) * t.element_size() for t in values if isinstance(t, torch.Tensor))


def work(torch: Any, model: Any, inputs: Sequence[Any]) -> tuple[Work, list[Any]]:
    """The reference's :class:`Work` on ``inputs`` (and its outputs): one call under
    ``FlopCounterMode``."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        out = model(*inputs)
    outs = list(out) if isinstance(out, tuple | list) else [out]
    state = [*model.parameters(), *model.buffers()]
    moved = nbytes(torch, inputs) + nbytes(torch, outs) + nbytes(torch, state)
    return Work(moved, int(counter.get_total_flops())), outs


COPY_BYTES = 256 << 20  # larger than any L2
GEMM_N = 4096


def ceilings(torch: Any, device: Any, clock: TorchClock, dtypes: Iterable[Any]) -> tuple[float, float]:
    """(device-to-device copy GB/s counting read + write, the best GEMM GFLOP/s over the float
    ``dtypes`` the task computes in, fp32 at the pinned precision), medians of a few runs."""

    def timed(fn: Callable[[], Any], runs: int = 5) -> float:
        poison(torch, [fn()])
        times = []
        for _ in range(runs):
            start, end = clock.event(), clock.event()
            clock.synchronize()
            clock.record(start)
            out = fn()
            clock.record(end)
            clock.synchronize()
            times.append(clock.elapsed_ms(start, end))
            poison(torch, [out])  # what it frees holds nothing an answer could pass off as its output
        return float(np.median(times)) * 1e-3

    def copy() -> float:
        src = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device)
        poison(torch, [src])  # and so the copy: nothing freed here holds anything but the poison
        dst = torch.empty_like(src)
        return 2 * COPY_BYTES / timed(lambda: dst.copy_(src)) / 1e9

    def gemm(dtype: Any) -> float:
        a = torch.randn(GEMM_N, GEMM_N, device=device).to(dtype)
        b = torch.randn(GEMM_N, GEMM_N, device=device).to(dtype)
        rate = 2 * GEMM_N**3 / timed(lambda: a @ b, 3) / 1e9
        poison(torch, [a, b])
        return rate

    floats = {torch.float32, *(d for d in dtypes if d.is_floating_point)}
    return copy(), max(gemm(d) for d in floats)


def wall_ms(clock: TorchClock, prepare: Callable[[], None], fn: Callable[[], Any], calls: int) -> float:
    """The median host-clock milliseconds of ``calls`` calls of ``fn``, each after ``prepare``
    (fresh inputs, a flushed L2) and a device-wide synchronize, each ended by another: the
    interval the events bracket, read from the host's clock."""
    samples = []
    for _ in range(calls):
        prepare()
        clock.settle()
        start = clock.now()
        fn()
        clock.settle()
        samples.append((clock.now() - start) * 1e3)
    return float(np.median(samples))
