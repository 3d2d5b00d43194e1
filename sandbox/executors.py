"""The one executor factory: which executor a setting names, what the environment adds, and making it.

The language server (from the editor's settings) and the command line (from its ``--gpu`` options)
both describe the executor they want as an :class:`ExecutorSettings`, let :func:`from_environment`
apply the environment, and call :func:`make_executor`.  The environment:

- ``CUDA_AGENT_RAY_ADDRESS``: a Ray cluster, where no executor was named;
- ``CUDA_AGENT_WORKER_URL`` (token in ``CUDA_AGENT_TOKEN``): a remote ``cuda-agent worker``, where
  no executor was named;
- ``CUDA_AGENT_TEST_EXECUTOR=1``: the simulated GPU (tests, demos), unless a remote worker is
  named, which then gets the candidates (and a note says so).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from base.secrets import Secret
from sandbox.executor import Executor

ExecutorKind = Literal["local", "remote", "ray", "test"]
EXECUTOR_KINDS: tuple[ExecutorKind, ...] = ("local", "remote", "ray", "test")
TEST_EXECUTOR_ENV = "CUDA_AGENT_TEST_EXECUTOR"
WORKER_URL_ENV = "CUDA_AGENT_WORKER_URL"
TOKEN_ENV = "CUDA_AGENT_TOKEN"
RAY_ADDRESS_ENV = "CUDA_AGENT_RAY_ADDRESS"


@dataclass(frozen=True)
class ExecutorSettings:
    """Which executor: this machine's GPUs, a remote worker, a Ray cluster or the simulated GPU."""

    kind: ExecutorKind = "local"
    gpu: int = 0  # local: GPU index
    gpus: tuple[int, ...] = ()  # local: GPU indices, one worker each (overrides ``gpu`` when given)
    url: str = ""  # remote: worker URL, e.g. https://gpu-box:8765
    token: Secret = field(default_factory=Secret)  # remote: bearer token
    ray_address: str = ""  # ray: cluster address, e.g. ray://head:10001


def from_environment(
    settings: ExecutorSettings, named: bool, env: Mapping[str, str] = os.environ
) -> tuple[ExecutorSettings, tuple[str, ...]]:
    """``settings`` with what the environment says (see the module's docstring), and notes for the
    user; ``named``: the user chose the executor's kind, which a worker URL or a Ray address in the
    environment then leaves alone."""
    notes: list[str] = []
    url = env.get(WORKER_URL_ENV, "").strip()
    address = env.get(RAY_ADDRESS_ENV, "").strip()
    if not named and address:
        settings = replace(settings, kind="ray", ray_address=settings.ray_address or address)
    elif not named and url:
        settings = replace(
            settings,
            kind="remote",
            url=settings.url or url,
            token=settings.token if settings.token.source else Secret(f"env:{TOKEN_ENV}"),
        )
    if env.get(TEST_EXECUTOR_ENV, "") not in ("", "0"):
        if settings.kind == "remote" and settings.url:  # a worker is named: it gets the candidates
            notes.append(
                f"{TEST_EXECUTOR_ENV} is set, but so is the remote worker {settings.url}: evaluating there "
                "(to simulate there: `cuda-agent worker --simulate`)"
            )
        else:
            settings = replace(settings, kind="test")
    return settings, tuple(notes)


def make_executor(settings: ExecutorSettings) -> Executor:
    """The executor the settings name (may spawn workers or connect: call off an event loop).
    Several local GPUs (``gpus``) share one scheduler: one worker per GPU, a kernel per GPU."""
    gpus = settings.gpus or (settings.gpu,)
    if settings.kind == "test":
        from sandbox.scheduler import local_scheduler
        from sandbox.testing import FakeExecutor

        if len(gpus) == 1:
            return FakeExecutor.from_env()
        return local_scheduler(gpus, lambda _: FakeExecutor.from_env())
    if settings.kind == "remote":
        from sandbox.remote import RemoteExecutor

        return RemoteExecutor(settings.url, settings.token.resolve())
    if settings.kind == "ray":
        from sandbox.remote import RayExecutor

        return RayExecutor(settings.ray_address or None)
    from sandbox.local import LocalExecutor
    from sandbox.scheduler import local_scheduler

    if len(gpus) == 1:
        return LocalExecutor(gpus)
    from sandbox.isolation import bwrap_prefix
    from sandbox.torch_build import BUILD_WORKERS, BuildPool, spawn_builder

    builds = BuildPool(spawn_builder(bwrap_prefix()), workers=BUILD_WORKERS)  # one for the host's GPUs
    return local_scheduler(gpus, lambda gpu: LocalExecutor((gpu,), builds=builds))
