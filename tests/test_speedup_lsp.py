"""``cudaAgent.speedup`` over the real language server's stdio (pytest-lsp), on the simulated GPU.

The workspace is the multi-file fixture program with the Python stand-in of tests/test_program.py;
``CUDA_AGENT_TEST_PROGRAM`` gives the server the simulated program's kernel table.  Through a
worker: a loopback worker (tests/test_remote_program.py) whose program host runs the simulated
GPU, named in the user's settings (``machine.executor``)."""

# ruff: noqa: F811 - test_server_lsp's pytest fixture (workspace) is imported by name

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from test_remote import TOKEN, running_worker
from test_remote_program import gone_within, simulated_host, spinning, started
from test_server_lsp import (
    ENV,
    SERVER,
    Workspace,
    answer_server_requests,
    apply_edits,
    finished,
    plain,
    workspace,  # noqa: F401 - fixture
)

from agent.program_sim import SimulatedMachine
from sandbox.testing import FakeExecutor

DATA = Path(__file__).parent / "data"
SPEEDUP_ENV = {**ENV, "CUDA_AGENT_TEST_PROGRAM": str(DATA / "program" / "multi_sim.json")}


WORKER_TOKEN_ENV = "SPEEDUP_TEST_WORKER_TOKEN"


def copy_program(root: Path) -> None:
    shutil.copytree(DATA / "capture" / "multi", root, dirs_exist_ok=True)
    shutil.copy(DATA / "program" / "run.py", root / "run.py")


async def initialize(lsp_client: LanguageClient, workspace: Workspace, settings: dict[str, Any]) -> None:
    answer_server_requests(lsp_client, workspace)
    lsp_client.set_configuration(settings, section="cudaAgent")  # the workspace/configuration answer
    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=workspace.root.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=workspace.root.as_uri(), name="ws")],
        initialization_options=settings,
    )
    await lsp_client.initialize_session(params)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=SPEEDUP_ENV))
async def client(lsp_client: LanguageClient, workspace: Workspace):
    copy_program(workspace.root)
    await initialize(lsp_client, workspace, {})
    yield
    await lsp_client.shutdown_session()


@pytest.fixture
def worker(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, SimulatedMachine]]:
    """A loopback worker whose programs run on the simulated GPU, its definitions the workspace's."""
    copy_program(workspace.root)
    monkeypatch.setenv("CUDA_AGENT_RECORDED_DIR", str(tmp_path / "recorded"))  # the worker's store
    host, sim = simulated_host(workspace.root, tmp_path)
    with running_worker(FakeExecutor(), programs=host) as (url, _):
        yield url, sim


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=SERVER, server_env={**SPEEDUP_ENV, WORKER_TOKEN_ENV: TOKEN})
)
async def remote_client(
    lsp_client: LanguageClient, workspace: Workspace, worker: tuple[str, SimulatedMachine]
):
    url, _ = worker
    user = {"executor": {"kind": "remote"}}
    await initialize(
        lsp_client,
        workspace,
        {**user, "machine": {"executor": {"url": url, "token": f"env:{WORKER_TOKEN_ENV}"}}},
    )
    yield
    await lsp_client.shutdown_session()


def sources(root: Path) -> dict[str, str]:
    return {str(p): p.read_text() for p in sorted(root.rglob("*")) if p.suffix in (".cu", ".cuh", ".cpp")}


async def start_speedup(client: LanguageClient, workspace: Workspace, **extra: Any) -> str:
    """Start a speedup run of the workspace's program; its id."""
    ref = {
        "uri": (workspace.root / "inc" / "kernels.cuh").as_uri(),
        "command": [sys.executable, "run.py"],
        "outputs": ["out.bin:float32", "out.txt"],
        "ignore": [],
        "rtol": 1e-6,
        "atol": 0.0,
        "top": 2,
        "share": 0.9,
        "budgetS": 8.0,
        "runs": 2,
        **extra,
    }
    started = plain(
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams("cudaAgent.speedup", [ref]))
    )
    assert started["status"] == "started" and started["kind"] == "speedup", started
    return str(started["runId"])


async def speedup(client: LanguageClient, workspace: Workspace, **extra: Any) -> dict[str, Any]:
    return await finished(workspace, await start_speedup(client, workspace, **extra), 120.0)


@pytest.mark.slow
async def test_a_checked_patch_comes_as_one_edit_to_confirm_and_the_disk_is_left_as_it_was(
    client: LanguageClient, workspace: Workspace
) -> None:
    before = sources(workspace.root)
    result = await speedup(client, workspace, build="echo built > build.log")
    assert result["status"] == "ok", result
    assert "outputs equal" in result["message"] and "predicted" in result["message"]
    assert sources(workspace.root) == before  # checked on disk, then restored
    assert (workspace.root / "build.log").is_file()  # the build ran
    (sent,) = workspace.applied
    annotations = sent.edit.change_annotations or {}
    changes = sent.edit.document_changes or []
    assert changes and all(isinstance(c, lsp.TextDocumentEdit) for c in changes)
    after = {}
    for c in changes:
        assert isinstance(c, lsp.TextDocumentEdit)
        for e in c.edits:
            assert (
                isinstance(e, lsp.AnnotatedTextEdit)
                and annotations[e.annotation_id].needs_confirmation is True
            )
        path = str(Path(c.text_document.uri.removeprefix("file://")))
        after[path] = apply_edits(before[path], [plain(e) for e in c.edits])
    assert any("__restrict__" in text for text in after.values())


@pytest.mark.slow
async def test_changed_outputs_mean_no_edit_and_an_error(
    client: LanguageClient, workspace: Workspace
) -> None:
    before = sources(workspace.root)
    result = await speedup(client, workspace, build="echo 1e-2 > drift.txt")
    assert result["status"] == "error" and "differ" in result["message"], result
    assert workspace.applied == []
    assert sources(workspace.root) == before


async def test_bad_arguments_are_refused_at_once(client: LanguageClient, workspace: Workspace) -> None:
    ref = {
        "uri": workspace.root.as_uri(),
        "command": [],
        "outputs": [],
        "ignore": [],
        "rtol": 1e-6,
        "atol": 0.0,
        "top": 2,
        "share": 0.9,
        "budgetS": 8.0,
        "runs": 2,
    }
    with pytest.raises(Exception, match="command"):
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams("cudaAgent.speedup", [ref]))
    with pytest.raises(Exception, match="rtol"):
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.speedup", [{**ref, "command": ["x"], "rtol": "loose"}])
        )


@pytest.mark.slow
async def test_the_program_runs_on_the_worker_named_in_the_users_settings(
    remote_client: LanguageClient, workspace: Workspace, worker: tuple[str, SimulatedMachine]
) -> None:
    _, sim = worker
    before = sources(workspace.root)
    build = "echo built > build.log"
    result = await speedup(remote_client, workspace, build=build)
    assert result["status"] == "ok", result
    assert "outputs equal" in result["message"] and "predicted" in result["message"]
    # built and run on the worker, every run preceded by the build; nothing built here
    assert sim.runs and sim.builds and all(b == build for b in sim.builds)
    assert not (workspace.root / "build.log").exists()
    assert (workspace.root / "out.bin").is_file()  # the outputs came back
    assert sources(workspace.root) == before  # checked on disk, then restored
    (sent,) = workspace.applied
    assert any(
        "__restrict__" in e.new_text
        for c in sent.edit.document_changes or []
        if isinstance(c, lsp.TextDocumentEdit)
        for e in c.edits
    )


async def test_through_a_worker_paths_outside_the_folder_are_refused(
    remote_client: LanguageClient, workspace: Workspace, worker: tuple[str, SimulatedMachine]
) -> None:
    _, sim = worker
    result = await speedup(remote_client, workspace, outputs=["../out.bin:float32"])
    assert result["status"] == "error" and "../out.bin: outside the current folder" in result["message"], (
        result
    )
    assert sim.runs == [] and workspace.applied == []


async def test_cancel_stops_the_build_on_the_worker(
    remote_client: LanguageClient, workspace: Workspace, worker: tuple[str, SimulatedMachine], tmp_path: Path
) -> None:
    _, sim = worker
    pidfile = tmp_path / "pid"
    run_id = await start_speedup(remote_client, workspace, build=spinning(pidfile))
    pid = await asyncio.to_thread(started, pidfile)  # the build spins on the worker
    await remote_client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("cudaAgent.cancel", [{"runId": run_id}])
    )
    result = await finished(workspace, run_id, 15.0)
    assert result["status"] == "error" and "cancelled" in result["message"], result
    assert gone_within(pid, 2.0), "the build's child outlived the cancel"
    assert sim.runs == [] and workspace.applied == []
    # the run showed its progress as the local one does: begun cancellable, ended
    reports = [r for rs in remote_client.progress_reports.values() for r in rs]
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].cancellable
    assert isinstance(reports[-1], lsp.WorkDoneProgressEnd)
