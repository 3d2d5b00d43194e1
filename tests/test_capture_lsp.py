"""``cudaAgent.capture`` over the real language server's stdio (pytest-lsp), no GPU.

The "program" is test_capture's stand-in: a Python script that writes the injection library's
launch records (those of the multi-file fixture, tests/data/capture/multi) where the library would;
``CUDA_AGENT_CAPTURE_LIBRARY`` names a library that is never loaded (nothing is built).
"""

# ruff: noqa: F811 - test_server_lsp's pytest fixture (workspace) is imported by name

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from test_capture import FAKE_PROGRAM, MULTI, RECORDS
from test_server_lsp import (
    ENV,
    SERVER,
    Workspace,
    answer_server_requests,
    apply_edits,
    finished,
    open_file,
    plain,
    workspace,  # noqa: F401 - fixture
)

from agent import capture as cap
from sandbox import capture as runner
from sandbox.capture import parse_records
from server.capture import kernel_pattern

CAPTURE_ENV = {**ENV, "CUDA_AGENT_CAPTURE_LIBRARY": "never-loaded.so"}


async def initialize(lsp_client: LanguageClient, workspace: Workspace) -> None:
    answer_server_requests(lsp_client, workspace)
    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=workspace.root.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=workspace.root.as_uri(), name="ws")],
    )
    await lsp_client.initialize_session(params)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=CAPTURE_ENV))
async def client(lsp_client: LanguageClient, workspace: Workspace):
    await initialize(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=ENV))
async def gpu_client(lsp_client: LanguageClient, workspace: Workspace):
    """A server that runs programs with the real injection library."""
    await initialize(lsp_client, workspace)
    yield
    await lsp_client.shutdown_session()


def project(workspace: Workspace) -> tuple[Path, list[str]]:
    """The fixture's header in the workspace, and the command line of the stand-in program."""
    header = workspace.root / "inc" / "kernels.cuh"
    header.parent.mkdir()
    header.write_text((MULTI / "inc" / "kernels.cuh").read_text())
    records = workspace.root.parent / "records.jsonl"
    records.write_text("\n".join(RECORDS) + "\n")
    program = workspace.root.parent / "fake.py"
    program.write_text(FAKE_PROGRAM)
    return header, [sys.executable, str(program), str(records)]


async def capture(
    client: LanguageClient, workspace: Workspace, timeout: float = 30.0, **args: Any
) -> dict[str, Any]:
    started = plain(
        await client.workspace_execute_command_async(lsp.ExecuteCommandParams("cudaAgent.capture", [args]))
    )
    assert started["status"] == "started" and started["kind"] == "capture", started
    return await finished(workspace, started["runId"], timeout)


def expected_text(header: Path, kernel: str) -> str:
    """What the CLI proposes for the first recorded launch of ``kernel``."""
    launches, _, _ = parse_records(RECORDS)
    first = next(x for x in launches if cap.parse_name(x.kernel).qualified == kernel)
    return cap.propose([first], None, [str(header)]).new_text


async def test_the_spec_of_the_watched_launch_goes_above_the_open_kernel_as_a_confirmed_edit(
    client: LanguageClient, workspace: Workspace
) -> None:
    header, command = project(workspace)
    uri = open_file(client, header)
    before = header.read_text()
    result = await capture(client, workspace, uri=uri, kernel="smooth3", command=command)
    assert result["status"] == "ok" and result["kernel"] == "smooth3", result
    assert result["message"].startswith("smooth3: launch 2 (grid") and "spec inserted" in result["message"]
    (sent,) = workspace.applied
    (change,) = sent.edit.document_changes or []
    assert isinstance(change, lsp.TextDocumentEdit)
    assert change.text_document.uri == uri and change.text_document.version == 1
    (edit,) = change.edits
    assert isinstance(edit, lsp.AnnotatedTextEdit)
    annotation = (sent.edit.change_annotations or {})[edit.annotation_id]
    assert annotation.needs_confirmation is True and "smooth3" in annotation.label
    after = apply_edits(before, [plain(edit)])
    assert after == expected_text(header, "smooth3")
    assert "// @cuda-agent arg out out float[n + 1]" in after
    assert header.read_text() == before  # nothing saved


async def test_without_a_kernel_the_first_launched_kernel_of_an_unopened_file_gets_the_edit(
    client: LanguageClient, workspace: Workspace
) -> None:
    header, command = project(workspace)
    main = workspace.root / "main.cu"
    main.write_text("int main() { return 0; }\n")  # the file the command was run from
    result = await capture(client, workspace, uri=main.as_uri(), command=command, cwd=".")
    assert result["status"] == "ok" and result["message"].startswith("scale_shift: launch 0"), result
    (sent,) = workspace.applied
    (change,) = sent.edit.document_changes or []
    assert isinstance(change, lsp.TextDocumentEdit)
    assert change.text_document.uri == header.as_uri() and change.text_document.version is None
    assert apply_edits(header.read_text(), [plain(e) for e in change.edits]) == expected_text(
        header, "scale_shift"
    )


BAD_ARGUMENTS = [
    ({"command": []}, "command"),
    ({"command": "python run.py"}, "arguments.command"),
    ({"command": ["python", 3]}, "arguments.command"),
    ({"command": ["python"], "kernel": "nope"}, "no kernel 'nope'"),
    ({"command": ["python"], "cwd": "missing/folder"}, "not a folder"),
    ({"command": ["python"], "uri": "file:///nowhere/k.cu"}, "not a file"),
]


async def test_bad_arguments_are_invalid_params(client: LanguageClient, workspace: Workspace) -> None:
    """Each mistake refused in turn by one server (a server per case costs a start each)."""
    header, _ = project(workspace)
    for args, why in BAD_ARGUMENTS:
        with pytest.raises(Exception, match=why) as refused:
            await client.workspace_execute_command_async(
                lsp.ExecuteCommandParams("cudaAgent.capture", [{"uri": header.as_uri(), **args}])
            )
        assert getattr(refused.value, "code", None) == -32602, args
    assert workspace.applied == [] and workspace.finished == {}


async def test_a_failing_or_missing_program_ends_the_run_with_its_reason(
    client: LanguageClient, workspace: Workspace
) -> None:
    header, _ = project(workspace)
    uri = open_file(client, header)
    failed = await capture(
        client, workspace, uri=uri, kernel="smooth3", command=[sys.executable, "-c", "raise SystemExit(3)"]
    )
    assert failed["status"] == "error" and "exit status 3" in failed["message"], failed
    assert "capture library was not loaded" in failed["message"]
    missing = await capture(client, workspace, uri=uri, command=["/nonexistent/program"])
    assert missing["status"] == "error" and missing["message"] == "/nonexistent/program: program not found"
    elsewhere = workspace.root.parent / "records-other.jsonl"  # launches of a kernel not in the sources
    elsewhere.write_text(json.dumps({**json.loads(RECORDS[0]), "kernel": "void other(float*)"}) + "\n")
    program = workspace.root.parent / "fake.py"
    unknown = await capture(
        client, workspace, uri=uri, command=[sys.executable, str(program), str(elsewhere)]
    )
    assert unknown["status"] == "error" and "kernel other not found" in unknown["message"], unknown
    assert workspace.applied == []


async def test_cancel_stops_the_program_and_sends_no_edit(
    client: LanguageClient, workspace: Workspace
) -> None:
    header, _ = project(workspace)
    uri = open_file(client, header)
    command = [sys.executable, "-c", "import time; time.sleep(600)"]  # stopped by the cancel below
    started = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(
                "cudaAgent.capture", [{"uri": uri, "kernel": "smooth3", "command": command}]
            )
        )
    )
    cancelled = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.cancel", [{"runId": started["runId"]}])
        )
    )
    assert cancelled["cancelled"] is True
    result = await finished(workspace, started["runId"])
    assert result["status"] == "error" and result["cancelled"] is True and "cancelled" in result["message"]
    assert workspace.applied == []


@pytest.mark.gpu
async def test_a_real_run_of_the_multi_file_program_gives_the_spec_the_cli_gives(
    gpu_client: LanguageClient, workspace: Workspace
) -> None:
    """On a GPU: the fixture program built with nvcc, watched through CUPTI from the editor."""
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    try:
        runner.build_library()
    except runner.CaptureError as exc:
        pytest.skip(str(exc))
    shutil.copytree(MULTI, workspace.root, dirs_exist_ok=True)
    build = ["nvcc", "-O2", "-arch=native", "-o", "prog", "src/main.cpp", "src/launch.cu", "-Iinc"]
    subprocess.run(build, cwd=workspace.root, check=True)
    header = workspace.root / "inc" / "kernels.cuh"
    uri = open_file(gpu_client, header)
    result = await capture(gpu_client, workspace, 120.0, uri=uri, kernel="smooth3", command=["./prog"])
    assert result["status"] == "ok" and result["message"].startswith("smooth3: launch 0"), result
    (sent,) = workspace.applied
    (change,) = sent.edit.document_changes or []
    assert isinstance(change, lsp.TextDocumentEdit)
    after = apply_edits(header.read_text(), [plain(e) for e in change.edits])
    run = runner.run_program(["./prog"], kernel=kernel_pattern("smooth3"), cwd=str(workspace.root))
    assert after == cap.propose(run.launches, None, [str(header)]).new_text
