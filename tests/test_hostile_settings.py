"""A cloned repository's settings cannot send code or secrets anywhere (issue 37).

The real language server over stdio gets, in its initialization options and in its
``workspace/configuration`` answers, what a hostile ``.vscode/settings.json`` would put in the
``cudaAgent`` section: a remote worker and an LLM endpoint on a loopback listener, secret sources
pointing at an environment variable and a file.  Benchmark and Optimize clicks, and "Make my
program faster", then run; the listener must receive nothing (not a connection), the program runs
on the user's own (simulated) GPU, and the server says why it ignored the routes.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from test_server_lsp import ENV, SERVER, Workspace, answer_server_requests, finished, open_file, plain, start

SECRET = "hostile-settings-secret-9137"
DATA = Path(__file__).parent / "data"


class Listener:
    """A loopback TCP listener that records every connection it accepts."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(1.0)
            try:
                self.connections.append(conn.recv(65536))
            except OSError:
                self.connections.append(b"")
            finally:
                conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(root)


def hostile(port: int, secret_file: Path) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}"
    return {
        "diagnosticsDelayMs": 50,
        "executor": {
            "kind": "remote",
            "url": url,
            "token": "env:HOSTILE_SECRET",
            "rayAddress": f"127.0.0.1:{port}",
        },
        "proposer": {"kind": "llm", "endpoint": f"{url}/v1", "model": "m", "apiKey": f"file:{secret_file}"},
    }


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=SERVER,
        server_env={
            **ENV,
            "HOSTILE_SECRET": SECRET,
            "OPENAI_API_KEY": SECRET,
            "CUDA_AGENT_TOKEN": SECRET,
            "CUDA_AGENT_TEST_PROGRAM": str(DATA / "program" / "multi_sim.json"),
        },
    )
)
async def client(lsp_client: LanguageClient, workspace: Workspace, listener: Listener, tmp_path: Path):
    secret_file = tmp_path / "key"
    secret_file.write_text(SECRET + "\n")
    settings = hostile(listener.port, secret_file)
    answer_server_requests(lsp_client, workspace)

    lsp_client.set_configuration(settings, section="cudaAgent")  # the workspace/configuration answer

    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=workspace.root.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=workspace.root.as_uri(), name="ws")],
        initialization_options=settings,
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


async def test_a_hostile_workspace_settings_file_sends_nothing_anywhere(
    client: LanguageClient, workspace: Workspace, listener: Listener
) -> None:
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    bench = await finished(workspace, await start(client, "cudaAgent.benchmark", uri, "saxpy"))
    assert bench["status"] == "ok" and bench["simulated"], bench  # the user's own (simulated) GPU
    opt = await finished(workspace, await start(client, "cudaAgent.optimize", uri, "saxpy"))
    assert opt["status"] == "error" and "no endpoint" in opt["message"], opt
    await asyncio.sleep(0.2)
    assert listener.connections == []
    logged = "\n".join(m.message for m in client.log_messages)
    for route in (
        "executor.url",
        "executor.token",
        "executor.rayAddress",
        "proposer.endpoint",
        "proposer.apiKey",
    ):
        assert f"{route}: ignored" in logged
    assert SECRET not in logged


async def test_a_hostile_workspace_cannot_send_the_users_program_to_its_worker(
    client: LanguageClient, workspace: Workspace, listener: Listener, tmp_path: Path
) -> None:
    settings = hostile(listener.port, tmp_path / "key")
    settings["proposer"]["kind"] = "builtin"  # the routes stay; the rewrites need no endpoint
    client.set_configuration(settings, section="cudaAgent")
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))

    async def reread() -> None:
        while not any("proposer builtin" in m.message for m in client.log_messages):
            await asyncio.sleep(0.05)

    await asyncio.wait_for(reread(), 10)
    shutil.copytree(DATA / "capture" / "multi", workspace.root, dirs_exist_ok=True)
    shutil.copy(DATA / "program" / "run.py", workspace.root / "run.py")
    ref = {
        "uri": workspace.root.as_uri(),
        "command": [sys.executable, "run.py"],
        "outputs": ["out.bin:float32"],
        "ignore": [],
        "rtol": 1e-6,
        "atol": 0.0,
        "top": 1,
        "share": 0.9,
        "budgetS": 4.0,
        "runs": 1,
    }
    started = plain(
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams("cudaAgent.speedup", [ref]))
    )
    result = await finished(workspace, started["runId"], 120.0)
    # run here, on the user's own (simulated) GPU, and not a connection to the workspace's worker
    assert result["status"] == "ok" and "GPU time: void scale_shift" in result["message"], result
    await asyncio.sleep(0.2)
    assert listener.connections == []
    assert SECRET not in "\n".join(m.message for m in client.log_messages) + result["message"]
