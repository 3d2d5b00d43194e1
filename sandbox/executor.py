"""Executors: where evaluations run.  One small interface, one implementation per place.

- :class:`LocalExecutor` (``sandbox.local``): spawned worker processes on this machine's GPUs.
- :class:`RemoteExecutor` (``sandbox.remote``): a ``cuda-agent worker`` over HTTP.
- :class:`RayExecutor` (``sandbox.remote``): one Ray actor per GPU (``num_gpus=1``) of a Ray cluster.
- :class:`GpuScheduler` (``sandbox.scheduler``): several one-GPU executors, one request per GPU at a time.

The language server and the optimizer see only :class:`Executor`; tests plug in their own.

Exceptions are for broken infrastructure only (no GPU, worker unreachable, wrong token)::

    ExecutorError
     ├── NoGpuError          no usable GPU / CuPy on this machine
     ├── WorkerUnavailable   remote worker unreachable or died and did not come back
     └── AuthError           remote worker refused the token

A candidate that fails is a :class:`~sandbox.contract.CandidateResult` with a status.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Sequence

from base.errors import Unavailable
from sandbox.contract import DeviceInfo, EvalRequest, EvalResult, Progress, TorchRequest, TorchResult

ProgressFn = Callable[[Progress], None]


class ExecutorError(Unavailable, RuntimeError):
    """The executor itself cannot do its job (not a verdict on a candidate)."""


class NoGpuError(ExecutorError):
    pass


class WorkerUnavailable(ExecutorError):
    pass


class AuthError(ExecutorError):
    pass


class Executor(abc.ABC):
    """Evaluates requests. Thread-safe: callers may evaluate from several threads at once."""

    @abc.abstractmethod
    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        """Run ``request`` to completion (or until ``cancel`` is set: remaining candidates come
        back with status ``cancelled``). Never hangs past the request's budgets."""

    def evaluate_torch(self, request: TorchRequest, *, cancel: threading.Event | None = None) -> TorchResult:
        """Evaluate KernelBench-format candidates (``sandbox.torch_eval``), each in a sandboxed
        process of its own; executors that cannot raise :class:`ExecutorError`."""
        raise ExecutorError(f"{type(self).__name__} does not evaluate PyTorch tasks (use a local executor)")

    def build_ahead(self, sources: Sequence[str]) -> None:  # noqa: B027 - optional hook
        """PyTorch answers ``sources`` are coming: start whatever of their evaluation needs no GPU
        (their ``load_inline`` builds) now, so the GPU never waits for it later."""

    @abc.abstractmethod
    def device_info(self) -> DeviceInfo:
        """The device evaluations run on (raises :class:`ExecutorError` if there is none)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release worker processes and connections."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
