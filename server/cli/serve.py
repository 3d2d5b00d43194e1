"""``serve`` and ``worker``: the language server, and this machine's GPUs served over HTTP."""

from __future__ import annotations

import os
import shutil
from typing import TYPE_CHECKING

import click

from base.errors import install_hint
from server.cli.common import (
    JobFailed,
    UserError,
    _exit_on_signal,
    log_isolation,
    serving_isolation,
    unsafe_isolation_option,
)
from server.cli.files import read_token

if TYPE_CHECKING:
    from sandbox.executor import Executor
    from sandbox.programs import ProgramHost


@click.command()
@click.option("--tcp", metavar="HOST:PORT", help="Listen on TCP instead of stdio (for debugging).")
@unsafe_isolation_option
def serve(tcp: str | None) -> None:
    """Run the language server on stdio."""
    if tcp is not None:
        _, sep, port = tcp.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise UserError(f"--tcp {tcp}: expected HOST:PORT, e.g. 127.0.0.1:2087")
    from server.app import serve as run_server

    run_server(tcp)


@click.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token-file",
    type=click.Path(),
    help="File holding the bearer token clients must send (required off loopback).",
)
@click.option("--tls-cert", type=click.Path(), help="PEM certificate (chain): serve HTTPS.")
@click.option("--tls-key", type=click.Path(), help="PEM private key of --tls-cert.")
@click.option(
    "--gpus", default="0", show_default=True, help="Comma-separated GPU indices to serve, one queue each."
)
@click.option(
    "--max-per-client",
    default=8,
    show_default=True,
    type=click.IntRange(1),
    help="Evaluations in flight per client.",
)
@click.option(
    "--max-timeout",
    default=600.0,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    help="Longest per-candidate timeout a request may ask for (seconds).",
)
@click.option(
    "--max-memory-gb",
    default=64.0,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    help="Largest GPU memory cap a request may ask for.",
)
@click.option(
    "--max-candidates",
    default=64,
    show_default=True,
    type=click.IntRange(0),
    help="Candidates per request.",
)
@click.option(
    "--trusted-proxy",
    multiple=True,
    help="Address of a proxy whose X-Forwarded-For names the client (repeatable; default: none).",
)
@click.option(
    "--simulate",
    is_flag=True,
    help="Serve simulated GPUs (no GPU used; code is still compiled): to try the remote flow anywhere.",
)
@click.option(
    "--allow-programs",
    is_flag=True,
    help="Serve POST /program: build and run a token holder's project on this machine's GPU (cuda-agent "
    "speedup through this worker), in bubblewrap with only its own folder writable.",
)
@unsafe_isolation_option
def worker(
    host: str,
    port: int,
    token_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    gpus: str,
    max_per_client: int,
    max_timeout: float,
    max_memory_gb: float,
    max_candidates: int,
    trusted_proxy: tuple[str, ...],
    simulate: bool,
    allow_programs: bool,
) -> None:
    """Serve this machine's GPUs to remote editors and optimizers over HTTP."""
    import logging
    import signal

    try:
        from base.asgi import make_server
        from sandbox import service
    except ImportError as exc:
        raise UserError(f"the worker needs the `worker` extra: {install_hint('worker')} ({exc})") from exc
    from base.http import check_listen_policy, check_tls, is_loopback, listen
    from sandbox.contract import RequestLimits
    from sandbox.executor import ExecutorError
    from sandbox.remote import local_gpu_executor
    from server.texts import plural

    token = read_token(token_file) if token_file else None
    why = check_listen_policy(host, token) or check_tls(tls_cert, tls_key)
    if why:
        raise UserError(why)
    isolation = serving_isolation()
    programs = _program_host() if allow_programs else None
    try:
        indices = [int(g) for g in gpus.split(",")]
    except ValueError:
        raise UserError(f"--gpus {gpus!r}: expected comma-separated GPU indices such as 0,1") from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("cuda_agent.worker")
    try:
        sock = listen(host, port)
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    request_limits = RequestLimits(
        max_timeout_s=max_timeout, max_memory_bytes=int(max_memory_gb * 2**30), max_candidates=max_candidates
    )
    limits = service.Limits(
        max_per_client=max_per_client, request=request_limits, trusted_proxies=trusted_proxy
    )
    executors: list[Executor] = []
    try:
        handler = os.environ.get("CUDA_AGENT_WORKER_HANDLER", "")  # tests: a scripted GPU handler
        for index in indices:
            if simulate:
                from sandbox.testing import FakeExecutor

                executors.append(FakeExecutor.from_env())
            else:
                executors.append(local_gpu_executor(index, request_limits, handler))
        app = service.WorkerService(
            executors,
            token=token,
            limits=limits,
            simulated=simulate,
            isolation=isolation,
            programs=programs,
        )
        server = make_server(app.app, tls_cert=tls_cert, tls_key=tls_key, limits=limits)
        scheme = "https" if tls_cert else "http"
        # uvicorn shuts down gracefully on SIGTERM, then raises the signal again under the handler
        # it found: make that handler an exit, so the pools below are stopped, not orphaned.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        where = f"{scheme}://{host}:{sock.getsockname()[1]}"
        if simulate:
            log.info("serving %s on %s (no GPU is used)", plural(len(indices), "simulated GPU"), where)
        else:
            try:
                names = [e.device_info().name for e in executors]
            except ExecutorError as exc:
                log.warning(
                    "serving GPUs %s on %s, but no usable GPU (%s); /health says so", gpus, where, exc
                )
            else:
                log.info("serving GPUs %s (%s) on %s", gpus, ", ".join(names), where)
        log_isolation(log, isolation)
        if programs is not None:
            from sandbox.isolation import bwrap_prefix

            confined = "in bubblewrap" if bwrap_prefix() else "UNCONFINED (--unsafe-no-isolation)"
            log.warning("--allow-programs: token holders' programs build and run here, %s", confined)
        if not token:
            log.warning("no --token-file: any user of this machine can run kernels on its GPUs")
        elif not tls_cert and not is_loopback(host):
            log.warning("no TLS: the token crosses the network in clear; use --tls-cert or an SSH tunnel")
        server.run(sockets=[sock])
    except ExecutorError as exc:
        raise JobFailed(str(exc)) from exc
    finally:
        for executor in executors:
            executor.close()
        sock.close()
        if programs is not None:
            shutil.rmtree(programs.root, ignore_errors=True)


def _program_host() -> ProgramHost:
    """``--allow-programs``: each request's program confined to its own folder by bubblewrap, or
    refused where bubblewrap cannot run unless ``--unsafe-no-isolation`` was given."""
    from sandbox.compile_pool import unisolated_allowed
    from sandbox.isolation import bwrap_prefix, clean_env, program_prefix
    from sandbox.programs import LocalMachine, ProgramHost

    if not bwrap_prefix() and not unisolated_allowed():
        raise UserError(
            "refusing --allow-programs: bubblewrap cannot run here, so a program would see and write "
            "everything this user can; install bubblewrap, or pass --unsafe-no-isolation"
        )
    return ProgramHost(
        lambda folder: LocalMachine(clean_env(), program_prefix(folder), str(folder / "scratch"))
    )
