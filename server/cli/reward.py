"""``reward``: score model completions against CUDA tasks (the learning loop)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from base.errors import install_hint
from server.cli import common
from server.cli.common import (
    JobFailed,
    UserError,
    _exit_on_signal,
    executor_failed,
    json_option,
    log_isolation,
    serving_isolation,
    unsafe_isolation_option,
)
from server.cli.files import read_source, read_token
from server.cli.render import emit_json, print_score

if TYPE_CHECKING:
    from sandbox.executor import Executor


def _task_set(paths: tuple[str, ...]) -> Any:
    from learning.tasks import DEFAULT_TASKS, TaskSet

    tasks = TaskSet.load(paths or (DEFAULT_TASKS,))
    if not len(tasks):
        raise UserError(f"no task in {', '.join(paths) or DEFAULT_TASKS}: " + "; ".join(tasks.skipped[:3]))
    return tasks


tasks_option = click.option(
    "--tasks",
    "task_paths",
    multiple=True,
    type=click.Path(),
    help="A .cu or KernelBench-format .py task file, or a folder of them (repeatable; default: bench/kernels).",
)


@click.group()
def reward() -> None:
    """Score model completions against CUDA tasks: a reward service for RL trainers."""


@reward.command("tasks")
@tasks_option
@click.option("--split", type=click.Choice(["train", "eval"]), help="Only the tasks of this split.")
@click.option("--prompts", is_flag=True, help="JSON lines {task, split, prompt}: a dataset for a trainer.")
def reward_tasks(task_paths: tuple[str, ...], split: str | None, prompts: bool) -> None:
    """List the tasks (name@hash, split, kernel)."""
    from learning.completion import prompt_row
    from sandbox.contract import to_json

    for task in _task_set(task_paths):
        if split and task.split != split:
            continue
        if prompts:
            click.echo(to_json(prompt_row(task)))
        else:
            click.echo(f"{task.ref}  {task.split:5}  {task.kernel}  ({task.path})")


@reward.command("score")
@click.argument("task")
@click.argument("file")
@tasks_option
@click.option(
    "--gpu", default=0, show_default=True, type=click.IntRange(min=0), help="GPU index to evaluate on."
)
@json_option
@unsafe_isolation_option
def reward_score(task: str, file: str, task_paths: tuple[str, ...], gpu: int, as_json: bool) -> None:
    """Score one completion: FILE holds a model's answer (a .cu/.cuh file is the kernel itself, a
    .py file a PyTorch task's ModelNew module)."""
    from learning.engine import Item, RewardEngine
    from sandbox.executor import ExecutorError

    tasks = _task_set(task_paths)
    tasks.resolve(task)
    path, text = read_source(file)
    if path.suffix in (".cu", ".cuh"):
        text = f"```cuda\n{text}\n```"
    elif path.suffix == ".py":  # a PyTorch task's ModelNew module itself
        text = f"```python\n{text}\n```"
    with common.open_executor(gpu) as executor:
        engine = RewardEngine(executor, tasks)
        try:
            scored = engine.score([Item(path.name, task, text)])[0]
        except ExecutorError as exc:
            raise executor_failed(exc) from exc
        finally:
            engine.close()
    if as_json:
        emit_json(scored)
    else:
        print_score(scored)
    if scored.reward is None:
        raise JobFailed(scored.reason)


@reward.command("serve")
@tasks_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8790, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token-file", type=click.Path(), help="File holding the bearer token (required off loopback)."
)
@click.option("--tls-cert", type=click.Path(), help="PEM certificate (chain): serve HTTPS.")
@click.option("--tls-key", type=click.Path(), help="PEM private key of --tls-cert.")
@click.option("--gpus", default="0", show_default=True, help="Comma-separated local GPU indices.")
@click.option("--workers", type=click.IntRange(1), help="Tasks evaluated at once (default: 2 per GPU).")
@click.option("--max-per-client", default=16, show_default=True, type=click.IntRange(1))
@click.option(
    "--max-items", default=1024, show_default=True, type=click.IntRange(1), help="Items per request."
)
@click.option(
    "--trusted-proxy", multiple=True, help="Address of a proxy whose X-Forwarded-For names the client."
)
@click.option("--simulate", is_flag=True, help="Simulated GPUs (no GPU used; code is still compiled).")
@unsafe_isolation_option
def reward_serve(
    task_paths: tuple[str, ...],
    host: str,
    port: int,
    token_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    gpus: str,
    workers: int | None,
    max_per_client: int,
    max_items: int,
    trusted_proxy: tuple[str, ...],
    simulate: bool,
) -> None:
    """Serve rewards over HTTP to RL trainers (TRL, verl, OpenRLHF), on any executor: local GPUs,
    a remote worker (CUDA_AGENT_WORKER_URL), Ray (CUDA_AGENT_RAY_ADDRESS) or --simulate."""
    import logging
    import signal

    try:
        from base.asgi import make_server
        from learning.engine import RewardEngine
        from learning.service import RewardLimits, RewardService
    except ImportError as exc:
        raise UserError(
            f"the reward service needs the `worker` extra: {install_hint('worker')} ({exc})"
        ) from exc
    from base.http import ConnectionLimits, check_listen_policy, check_tls, listen

    tasks = _task_set(task_paths)
    token = read_token(token_file) if token_file else None
    why = check_listen_policy(host, token) or check_tls(tls_cert, tls_key)
    if why:
        raise UserError(why)
    isolation = serving_isolation()
    try:
        indices = tuple(int(g) for g in gpus.split(","))
    except ValueError:
        raise UserError(f"--gpus {gpus!r}: expected comma-separated GPU indices such as 0,1") from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("cuda_agent.reward")
    try:
        sock = listen(host, port)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    if simulate:
        from sandbox.testing import FakeExecutor

        executor: Executor = FakeExecutor.from_env()
    else:
        executor = common.open_executor(indices[0], indices)
    engine = RewardEngine(executor, tasks, workers=workers or 2 * len(indices))
    limits = RewardLimits(max_per_client=max_per_client, max_items=max_items)
    app = RewardService(engine, token=token, limits=limits, isolation=isolation)
    server = make_server(
        app.app, tls_cert=tls_cert, tls_key=tls_key, limits=ConnectionLimits(trusted_proxies=trusted_proxy)
    )
    signal.signal(signal.SIGTERM, _exit_on_signal)
    where = f"{'https' if tls_cert else 'http'}://{host}:{sock.getsockname()[1]}"
    log.info("serving %d tasks on %s%s", len(tasks), where, " (simulated GPU)" if simulate else "")
    log_isolation(log, isolation)
    try:
        server.run(sockets=[sock])
    finally:
        engine.close()
        executor.close()
        sock.close()
