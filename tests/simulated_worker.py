"""`cuda-agent worker --simulate` on loopback, for the remote flow's tests (CLI and editor)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx


@dataclass(frozen=True)
class Worker:
    url: str
    token: str
    log: Path  # the worker's stdout and stderr
    env: dict[str, str]  # this process's environment without CUDA_AGENT_* variables

    def client_env(self) -> dict[str, str]:
        """The environment of a CLI or server that sends its candidates to this worker."""
        return {**self.env, "CUDA_AGENT_WORKER_URL": self.url, "CUDA_AGENT_TOKEN": self.token}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def simulated_worker(tmp_path: Path, token: str) -> Iterator[Worker]:
    """A simulated worker on a free loopback port, its token in a private file; up when this
    yields, stopped after."""
    token_file = tmp_path / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "worker.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_")}
    # isolation is not what these tests are about: serve where the host cannot isolate compiles too
    argv = [
        sys.executable,
        "-m",
        "server",
        "worker",
        "--simulate",
        "--unsafe-no-isolation",
        "--port",
        str(port),
    ]
    with log_path.open("w") as log_file:
        worker = subprocess.Popen(
            [*argv, "--token-file", str(token_file)], stdout=log_file, stderr=subprocess.STDOUT, env=env
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert worker.poll() is None, log_path.read_text()
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{url}/health", timeout=1)
                break
            assert time.monotonic() < deadline, "the worker did not come up"
            time.sleep(0.1)
        yield Worker(url, token, log_path, env)
    finally:
        worker.terminate()
        worker.wait(30)
