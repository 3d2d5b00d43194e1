"""End to end: the real language server over stdio, driven like VS Code drives it (pytest-lsp).

The server runs with the ``test`` executor (``CUDA_AGENT_TEST_EXECUTOR=1``: a deterministic
in-process fake, no GPU) on a copy of ``tests/data/lsp_workspace.cu`` in a temporary workspace.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

DATA = Path(__file__).parent / "data"
SERVER = [sys.executable, "-m", "server", "serve"]
ENV = {**os.environ, "CUDA_AGENT_TEST_EXECUTOR": "1", "CUDA_AGENT_TEST_EXECUTOR_DELAY": "0.05"}


class Workspace:
    """The temporary workspace folder and what the client received that pytest-lsp does not keep."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.applied: list[lsp.ApplyWorkspaceEditParams] = []
        self.apply_result = True
        self.lens_refreshes = 0
        self.statuses: list[dict[str, Any]] = []

    def copy(self, name: str, as_name: str | None = None) -> Path:
        dest = self.root / (as_name or name)
        shutil.copy(DATA / name, dest)
        return dest


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(root)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=ENV))
async def client(lsp_client: LanguageClient, workspace: Workspace):
    @lsp_client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        workspace.applied.append(params)
        return lsp.ApplyWorkspaceEditResult(applied=workspace.apply_result)

    @lsp_client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params: None) -> None:
        workspace.lens_refreshes += 1

    @lsp_client.feature(lsp.CLIENT_REGISTER_CAPABILITY)
    def register(params: lsp.RegistrationParams) -> None:
        return None

    @lsp_client.feature("cudaAgent/status")
    def status(params: Any) -> None:
        workspace.statuses.append(params._asdict())

    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=workspace.root.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=workspace.root.as_uri(), name="ws")],
        initialization_options={"diagnosticsDelayMs": 50},
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


def open_file(client: LanguageClient, path: Path, language: str = "cuda-cpp", text: str | None = None) -> str:
    uri = path.as_uri()
    body = path.read_text() if text is None else text
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id=language, version=1, text=body)
        )
    )
    return uri


async def diagnostics_for(client: LanguageClient, uri: str, timeout: float = 30.0) -> list[lsp.Diagnostic]:
    async def wait() -> list[lsp.Diagnostic]:
        while uri not in client.diagnostics:
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        return list(client.diagnostics[uri])

    return await asyncio.wait_for(wait(), timeout)


def kernel_line(path: Path, kernel: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines()) if f"void {kernel}(" in line)


async def test_symbols_lenses_hover_and_diagnostics(client: LanguageClient, workspace: Workspace) -> None:
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    doc = lsp.TextDocumentIdentifier(uri)

    symbols = await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc))
    assert symbols is not None
    names = [s.name for s in symbols]
    assert names == ["saxpy", "scale", "gain_stage", "copy_frame"]
    saxpy = symbols[0]
    assert isinstance(saxpy, lsp.DocumentSymbol)
    assert saxpy.selection_range.start.line == kernel_line(path, "saxpy")
    assert [c.name for c in saxpy.children or []] == ["x", "y", "a", "n"]

    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(doc))
    assert lenses is not None
    by_line: dict[int, list[str]] = {}
    for lens in lenses:
        assert lens.command is not None
        by_line.setdefault(lens.range.start.line, []).append(lens.command.title)
    assert by_line[kernel_line(path, "saxpy")] == ["▶ Benchmark", "⚡ Optimize"]
    assert by_line[kernel_line(path, "scale")] == ["Add benchmark spec"]
    optimize = next(lens for lens in lenses if lens.command and lens.command.command == "cudaAgent.optimize")
    assert optimize.command is not None
    assert list(optimize.command.arguments or []) == [{"uri": uri, "kernel": "saxpy"}]

    line = kernel_line(path, "saxpy")
    col = path.read_text().splitlines()[line].index("saxpy") + 2
    hover = await client.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(line, col)))
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    assert "__global__ void saxpy(const float* x, float* y, float a, int n)" in hover.contents.value
    assert "@cuda-agent sizes n=1<<20" in hover.contents.value

    diags = await diagnostics_for(client, uri)
    by_code = {d.code: d for d in diags}
    error = by_code["nvrtc-error"]
    gain_line = next(i for i, t in enumerate(path.read_text().splitlines()) if "* gain;" in t)
    assert error.severity == lsp.DiagnosticSeverity.Error
    assert "gain" in error.message
    start = path.read_text().splitlines()[gain_line].index("gain;")
    assert error.range == lsp.Range(lsp.Position(gain_line, start), lsp.Position(gain_line, start + 4))
    assert error.code_description is not None and error.code_description.href.endswith(
        "diagnostics.md#nvrtc-error"
    )
    assert by_code["block-size"].range.start.line == next(
        i for i, t in enumerate(path.read_text().splitlines()) if "scale<<<" in t
    )
    assert "copy_frame" in by_code["unchecked-index"].message
    assert {d.message.split(" ")[0] for d in diags if d.code == "missing-spec"} == {"scale", "gain_stage"}
