"""What every command shares: the user-facing errors, the build and memory options, the executor."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from base.errors import Failed, InputError

if TYPE_CHECKING:
    from sandbox.executor import Executor


class UserError(InputError, click.ClickException):
    """A mistake the user can fix; printed as one line, exit status 2 (from :class:`InputError`)."""


class JobFailed(Failed, click.ClickException):
    """The job ran and failed (no GPU, compile errors found...); exit status 1 (from :class:`Failed`)."""


def executor_failed(exc: Exception) -> JobFailed:
    """The executor could not run (no GPU, worker unreachable...): one line, with the way out."""
    from sandbox.executor import NoGpuError

    if isinstance(exc, NoGpuError):
        return JobFailed(
            f"{exc}. Ways forward: a GPU here (an NVIDIA driver and CuPy: pip install -e '.[gpu]' in your "
            "clone of cuda-agent, '.[gpu-cuda12]' for a CUDA 12 driver) or elsewhere (CUDA_AGENT_WORKER_URL "
            "and CUDA_AGENT_TOKEN of a `cuda-agent worker`); or, to try the flow without one, --simulate "
            "(made-up numbers)"
        )
    return JobFailed(str(exc))


json_option = click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
simulate_option = click.option(
    "--simulate",
    is_flag=True,
    help="Run on the simulated GPU (no GPU used): code is still compiled, but every changed candidate "
    "'verifies' 2x faster. The numbers are made up, and say so.",
)


@dataclasses.dataclass(frozen=True)
class BuildFlags:
    """``-I``/``-D``/``--compile-commands`` as given: one build configuration for every command."""

    include: tuple[str, ...] = ()
    define: tuple[str, ...] = ()
    compile_commands: str | None = None

    def options(self, source: Path) -> tuple[str, ...]:
        from agent.check import CompileCommandsError, DefineError, build_options

        try:
            return build_options(source, self.include, self.define, self.compile_commands)
        except (CompileCommandsError, DefineError) as exc:
            raise UserError(str(exc)) from exc


def build_flags(f: Callable[..., None]) -> Callable[..., None]:
    """Adds ``-I``, ``-D`` and ``--compile-commands``, handed to the command as ``build: BuildFlags``."""

    @functools.wraps(f)
    def command(
        *args: Any, include: tuple[str, ...], define: tuple[str, ...], compile_commands: str | None, **kw: Any
    ) -> None:
        f(*args, build=BuildFlags(include, define, compile_commands), **kw)

    for option in (
        click.option(
            "--compile-commands", type=click.Path(), help="compile_commands.json to take -I/-D from."
        ),
        click.option(
            "-D", "define", multiple=True, help="Preprocessor definition NAME[=VALUE] (repeatable)."
        ),
        click.option("-I", "include", multiple=True, help="Include directory (repeatable)."),
    ):
        command = option(command)
    return command


def memory_option(f: Callable[..., None]) -> Callable[..., None]:
    """Adds ``--max-memory-gb``: the GPU memory one evaluation may allocate (``Budget.gpu_memory_bytes``),
    handed to the command as ``eval_budget`` (None: the default cap)."""

    @click.option(
        "--max-memory-gb",
        type=click.FloatRange(min=0, min_open=True),
        help="GPU memory one evaluation may allocate, in GiB (default 4; a worker allows up to its own limit).",
    )
    @functools.wraps(f)
    def wrapper(*args: Any, max_memory_gb: float | None, **kw: Any) -> None:
        from sandbox.contract import Budget

        cap = (
            None if max_memory_gb is None else Budget(gpu_memory_bytes=max(1, int(max_memory_gb * (1 << 30))))
        )
        f(*args, eval_budget=cap, **kw)

    return wrapper


def _allow_unisolated(ctx: click.Context, param: click.Parameter, value: bool) -> bool:
    if value:
        from sandbox.compile_pool import allow_unisolated_compiles

        allow_unisolated_compiles()
    return value


def unsafe_isolation_option(f: Callable[..., None]) -> Callable[..., None]:
    """``--unsafe-no-isolation``: the one way past the isolation rule (:mod:`sandbox.compile_pool`):
    without it a command that compiles untrusted code (a request's, an LLM's) where neither
    bubblewrap nor Landlock can confine the compiler refuses to."""
    return click.option(
        "--unsafe-no-isolation",
        is_flag=True,
        expose_value=False,
        callback=_allow_unisolated,
        help="Compile untrusted code (requests, LLM output) even where it cannot be isolated from this "
        "host (no bubblewrap, no Landlock): it could then read any file this user can.",
    )(f)


def serving_isolation() -> str:
    """A service's compile isolation (for its ``/health``), or the refusal to serve without one."""
    from sandbox.compile_pool import UNISOLATED, require_isolation
    from sandbox.confine import ConfinementError

    try:
        return require_isolation()
    except ConfinementError:
        raise UserError(f"refusing to serve: {UNISOLATED}") from None


def log_isolation(log: Any, isolation: str) -> None:
    if isolation == "none":
        log.warning(
            "--unsafe-no-isolation: compiles are NOT isolated; a request can read any file this user can"
        )
    else:
        log.info("compiles are isolated from this host by %s", isolation)


def open_executor(gpu: int, gpus: tuple[int, ...] = (), simulate: bool = False) -> Executor:
    """The local GPUs' sandbox (``gpus``, else ``gpu``: one worker per GPU), or what the environment
    names instead (:func:`sandbox.executors.from_environment`: a Ray cluster, a remote worker, the
    simulated GPU); its notes go to stderr.  ``simulate`` (``--simulate``): the simulated GPU,
    whatever the environment names."""
    from sandbox.executors import ExecutorSettings, from_environment, make_executor

    if simulate:
        return make_executor(ExecutorSettings(kind="test", gpu=gpu, gpus=gpus))

    settings, notes = from_environment(ExecutorSettings(kind="local", gpu=gpu, gpus=gpus), named=False)
    for note in notes:
        click.echo(f"cuda-agent: {note}", err=True)
    if settings.kind == "remote" and not settings.token.resolve():
        raise UserError(f"CUDA_AGENT_WORKER_URL is set but {settings.token.source.partition(':')[2]} is not")
    return make_executor(settings)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)
