"""``cudaAgent.speedup`` over the real language server's stdio (pytest-lsp), on the simulated GPU.

The workspace is the multi-file fixture program with the Python stand-in of tests/test_program.py;
``CUDA_AGENT_TEST_PROGRAM`` gives the server the simulated program's kernel table."""

# ruff: noqa: F811 - test_server_lsp's pytest fixture (workspace) is imported by name

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
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

DATA = Path(__file__).parent / "data"
SPEEDUP_ENV = {**ENV, "CUDA_AGENT_TEST_PROGRAM": str(DATA / "program" / "multi_sim.json")}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=SPEEDUP_ENV))
async def client(lsp_client: LanguageClient, workspace: Workspace):
    answer_server_requests(lsp_client, workspace)
    shutil.copytree(DATA / "capture" / "multi", workspace.root, dirs_exist_ok=True)
    shutil.copy(DATA / "program" / "run.py", workspace.root / "run.py")
    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=workspace.root.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=workspace.root.as_uri(), name="ws")],
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


def sources(root: Path) -> dict[str, str]:
    return {str(p): p.read_text() for p in sorted(root.rglob("*")) if p.suffix in (".cu", ".cuh", ".cpp")}


async def speedup(client: LanguageClient, workspace: Workspace, **extra: Any) -> dict[str, Any]:
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
    return await finished(workspace, started["runId"], 120.0)


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
