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


def change(
    client: LanguageClient, uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str
) -> None:
    rng = lsp.Range(lsp.Position(*start), lsp.Position(*end))
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
            [lsp.TextDocumentContentChangePartial(range=rng, text=text)],
        )
    )


async def test_incremental_edits_update_symbols_and_only_current_diagnostics(
    client: LanguageClient, workspace: Workspace
) -> None:
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    await diagnostics_for(client, uri)
    line = kernel_line(path, "scale")
    col = path.read_text().splitlines()[line].index("scale")
    # rename the kernel one keystroke at a time, then fix the compile error
    for version, ch in enumerate("_v2", start=2):
        change(client, uri, version, (line, col + 5 + version - 2), (line, col + 5 + version - 2), ch)
    gain_line = next(i for i, t in enumerate(path.read_text().splitlines()) if "* gain;" in t)
    gcol = path.read_text().splitlines()[gain_line].index("gain;")
    change(client, uri, 5, (gain_line, gcol), (gain_line, gcol + 4), "2.0f")
    symbols = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri))
    )
    assert [s.name for s in symbols or []] == ["saxpy", "scale_v2", "gain_stage", "copy_frame"]

    async def settled() -> None:
        while True:
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            if not any(d.code == "nvrtc-error" for d in client.diagnostics[uri]):
                return

    await asyncio.wait_for(settled(), 30)
    codes = sorted(str(d.code) for d in client.diagnostics[uri])
    assert codes == ["block-size", "missing-spec", "missing-spec", "unchecked-index"]
    assert any("scale_v2" in d.message for d in client.diagnostics[uri])


async def test_bad_documents_and_bad_requests_do_not_crash(
    client: LanguageClient, workspace: Workspace
) -> None:
    binary = workspace.root / "blob.cu"
    binary.write_bytes(b"\x00\x01\xff\xfe__global__ void k(\x00int* p) {\xc3\x28 p[0] = 1; }\n" * 50)
    uri_bin = open_file(client, binary, text=binary.read_bytes().decode("utf-8", "replace"))
    huge = workspace.root / "huge.cu"
    unit = (DATA / "lsp_workspace.cu").read_text()
    huge.write_text(unit * (9_000_000 // len(unit) + 1))
    uri_huge = open_file(client, huge)
    python = workspace.root / "notes.py"
    python.write_text("print('not cuda')\n")
    uri_py = open_file(client, python, language="python")
    for uri in (uri_bin, uri_huge, uri_py):
        doc = lsp.TextDocumentIdentifier(uri)
        await client.text_document_document_symbol_async(lsp.DocumentSymbolParams(doc))
        await client.text_document_code_lens_async(lsp.CodeLensParams(doc))
        await client.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(10_000_000, 5)))
        await client.text_document_inlay_hint_async(
            lsp.InlayHintParams(doc, lsp.Range(lsp.Position(0, 0), lsp.Position(10_000_000, 0)))
        )
    # an edit whose range lies past the end of the document
    change(client, uri_bin, 2, (99_999, 3), (100_000, 0), "__global__ void tail(float* q) { q[0] = 1.0f; }\n")
    # commands with missing, malformed or unknown arguments answer with an error
    bad_args: list[list[Any]] = [
        [],
        [{"uri": 3}],
        [{"uri": "file:///nowhere.cu", "kernel": "k"}],
        [{"uri": uri_bin}],
        ["x", "y"],
    ]
    for args in bad_args:
        with pytest.raises(Exception, match=r"argument|not open|no kernel|kernels"):
            await client.workspace_execute_command_async(lsp.ExecuteCommandParams("cudaAgent.optimize", args))
    with pytest.raises(Exception, match=r"runId|no verified rewrite"):
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.applyRewrite", [{"runId": 7}])
        )
    with pytest.raises(Exception, match="no verified rewrite"):
        await client.protocol.send_request_async("cudaAgent/rewrite", {"runId": "nope"})
    with pytest.raises(Exception, match="uri"):
        await client.protocol.send_request_async("cudaAgent/results", {"uri": 42})
    # still serving
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    symbols = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri))
    )
    assert len(symbols or []) == 4
    tail = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri_bin))
    )
    assert "tail" in [s.name for s in tail or []]
