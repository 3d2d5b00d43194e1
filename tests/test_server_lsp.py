"""End to end: the real language server over stdio, driven like VS Code drives it (pytest-lsp).

The server runs with the ``test`` executor (``CUDA_AGENT_TEST_EXECUTOR=1``: a deterministic
in-process fake, no GPU) on a copy of ``tests/data/lsp_workspace.cu`` in a temporary workspace.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from lsprotocol.converters import get_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from cudasrc import specs as spec_mod
from cudasrc.source import Document

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
        self.finished: dict[str, dict[str, Any]] = {}  # cudaAgent/runFinished by run id

    def copy(self, name: str, as_name: str | None = None) -> Path:
        dest = self.root / (as_name or name)
        shutil.copy(DATA / name, dest)
        return dest


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    root = tmp_path / "ws"
    root.mkdir()
    return Workspace(root)


def answer_server_requests(lsp_client: LanguageClient, workspace: Workspace) -> None:
    """The client side of what the server asks of an editor: edits, lens refreshes, status."""

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
        workspace.statuses.append(plain(params))

    @lsp_client.feature("cudaAgent/runFinished")
    def finished(params: Any) -> None:
        workspace.finished[params.runId] = plain(params)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=ENV))
async def client(lsp_client: LanguageClient, workspace: Workspace):
    answer_server_requests(lsp_client, workspace)
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
    assert [(s.name, s.detail) for s in symbols] == [
        ("saxpy", "__global__ (const float*, float*, float, int)"),
        ("scale", "__global__ (float*, float, int)"),
        ("gain_stage", "__global__ (const float*, float*, int)"),
        ("clamp_unit", "__device__"),
        ("copy_frame", "__global__ (const float*, float*)"),
        ("run", "host"),
    ]
    saxpy = symbols[0]
    assert isinstance(saxpy, lsp.DocumentSymbol)
    assert saxpy.selection_range.start.line == kernel_line(path, "saxpy")
    assert [(p.name, p.detail) for p in saxpy.children or []] == [
        ("x", "const float*"),
        ("y", "float*"),
        ("a", "float"),
        ("n", "int"),
    ]

    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(doc))
    assert lenses is not None
    by_line: dict[int, list[str]] = {}
    for lens in lenses:
        assert lens.command is not None
        by_line.setdefault(lens.range.start.line, []).append(lens.command.title)
    assert by_line[kernel_line(path, "saxpy")] == ["▶ Benchmark", "⚡ Optimize", "◔ Profile"]
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
    assert [s.name for s in symbols or []] == [
        "saxpy",
        "scale_v2",
        "gain_stage",
        "clamp_unit",
        "copy_frame",
        "run",
    ]

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
    with pytest.raises(Exception, match=r"runId"):
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
    assert len(symbols or []) == 6
    tail = await client.text_document_document_symbol_async(
        lsp.DocumentSymbolParams(lsp.TextDocumentIdentifier(uri_bin))
    )
    assert "tail" in [s.name for s in tail or []]


def plain(value: Any) -> Any:
    """pygls hands custom results over as namedtuples: back to dicts and lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "__attrs_attrs__"):
        return get_converter().unstructure(value)
    return value


def apply_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """Apply LSP text edits (ranges against ``text``; ASCII, so columns count characters)."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(p: dict[str, int]) -> int:
        return starts[p["line"]] + p["character"]

    out, pos = [], 0
    for e in sorted(edits, key=lambda e: offset(e["range"]["start"])):
        out += [text[pos : offset(e["range"]["start"])], e["newText"]]
        pos = offset(e["range"]["end"])
    return "".join(out) + text[pos:]


def command_of(action: lsp.Command | lsp.CodeAction) -> str:
    """The command a code action runs.  lsprotocol's client-side hook turns any result item with a
    ``command`` key into a ``Command`` (stringifying a CodeAction's nested command), so undo that."""
    if isinstance(action, lsp.CodeAction):
        return action.command.command if action.command else ""
    nested = action.command
    return str(ast.literal_eval(nested)["command"]) if nested.startswith("{") else nested


async def start(client: LanguageClient, command: str, uri: str, kernel: str) -> str:
    """Start a run; the command answers at once with its id."""
    started = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command, [{"uri": uri, "kernel": kernel}])
        )
    )
    assert started["status"] == "started" and started["runId"], started
    return started["runId"]  # type: ignore[no-any-return]


async def finished(workspace: Workspace, run_id: str, timeout: float = 30.0) -> dict[str, Any]:
    """The run's ``cudaAgent/runFinished`` notification."""

    async def wait() -> dict[str, Any]:
        while run_id not in workspace.finished:
            await asyncio.sleep(0.02)
        return workspace.finished[run_id]

    return await asyncio.wait_for(wait(), timeout)


async def optimize(client: LanguageClient, workspace: Workspace, uri: str, kernel: str) -> dict[str, Any]:
    return await finished(workspace, await start(client, "cudaAgent.optimize", uri, kernel))


async def test_optimize_reports_progress_and_offers_a_verified_rewrite(
    client: LanguageClient, workspace: Workspace
) -> None:
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    text = path.read_text()
    result = await optimize(client, workspace, uri, "saxpy")
    assert result["status"] == "ok" and result["rewriteReady"] and result["kind"] == "optimize", result
    assert (result["uri"], result["kernel"]) == (uri, "saxpy")
    assert result["optimize"]["speedup"] == pytest.approx(2.0)
    assert not result["cancelled"]

    # the run's end refreshed the lenses: no Cancel lens is left
    async def refreshed() -> None:
        while workspace.lens_refreshes < 2:  # one when the run started, one when it ended
            await asyncio.sleep(0.02)

    await asyncio.wait_for(refreshed(), 10)
    after = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert not [ln for ln in after or [] if ln.command and "Cancel" in ln.command.title]

    # every candidate's verdict, and the simulated GPU named wherever a number is shown
    attempts = result["optimize"]["history"]  # the stored record's, as the results view gets it
    assert attempts and [a["index"] for a in attempts] == list(range(len(attempts)))
    assert all(a["status"] == "ok" and a["candidateId"] and a["speedup"] == 2.0 for a in attempts)
    assert all(a["compileLine"] == 0 and a["firstBadIndex"] == -1 for a in attempts)
    assert result["simulated"] is True
    n = len(attempts)
    assert result["message"].startswith("simulated GPU, not measured: 2.00× faster, verified")
    assert f"{n} candidate{'s' if n > 1 else ''}: {n} ok" in result["message"]

    # progress: begin (cancellable) -> reports with percentages and candidate counts -> end
    ((_token, reports),) = [(t, r) for t, r in client.progress_reports.items() if r]
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].cancellable
    steps = [r for r in reports if isinstance(r, lsp.WorkDoneProgressReport)]
    assert steps and all(0 <= (r.percentage or 0) <= 100 for r in steps)
    assert any("candidates tried" in (r.message or "") and "best 2.00×" in (r.message or "") for r in steps)
    assert isinstance(reports[-1], lsp.WorkDoneProgressEnd) and "2.00× faster" in (reports[-1].message or "")

    # the hint, the lens and the stored result
    line = kernel_line(path, "saxpy")
    hints = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(200, 0))
        )
    )
    (hint,) = hints or []
    assert hint.label == "⚡ 2.00× (simulated GPU, not measured)"
    assert hint.position == lsp.Position(line, text.splitlines()[line].index("saxpy") + len("saxpy"))
    assert isinstance(hint.tooltip, lsp.MarkupContent)
    for part in ("simulated GPU, not measured", "n=", "seeds", "tolerance", "1 ms median"):
        assert part in hint.tooltip.value
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    apply_lens = [ln for ln in lenses or [] if ln.command and ln.command.command == "cudaAgent.applyRewrite"]
    assert [ln.command.title for ln in apply_lens if ln.command] == [
        "✓ Apply verified rewrite (2.00× faster, simulated GPU, not measured)"
    ]
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri),
            lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)),
            lsp.CodeActionContext([]),
        )
    )
    assert [command_of(a) for a in actions or []] == [
        "cudaAgent.applyRewrite",
        "cudaAgent.optimize",
        "cudaAgent.benchmark",
    ]
    stored = await client.protocol.send_request_async("cudaAgent/results", {"uri": uri})
    (entry,) = stored.results
    stored_run = entry.results.optimize
    assert (entry.kernel, stored_run.speedup, stored_run.device) == ("saxpy", 2.0, "simulated GPU")
    assert stored_run.simulated is True and stored_run.outcome == "improved"
    assert [a.candidateId for a in stored_run.history] == [a["candidateId"] for a in attempts]
    assert stored_run.speedupLow > 0 and stored_run.stopReason  # one casing: camelCase
    assert plain(stored_run) == result["optimize"]  # the run's end carried the stored record
    assert (workspace.root / ".cuda-agent" / "results.json").exists()
    assert (workspace.root / ".cuda-agent" / ".gitignore").read_text().splitlines()[-1] == "*"

    # the side-by-side payload: the document as the run saw it, and the rewrite
    rewrite = await client.protocol.send_request_async("cudaAgent/rewrite", {"runId": result["runId"]})
    assert rewrite.original == text and rewrite.version == 1 and rewrite.rewritten != text
    assert rewrite.runId == result["runId"]

    # accepted through workspace/applyEdit: versioned, annotated, needing confirmation
    applied = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.applyRewrite", [{"runId": result["runId"]}])
        )
    )
    assert (applied["applied"], applied["reason"]) == (True, "applied")
    (params,) = workspace.applied
    (doc_edit,) = params.edit.document_changes or []
    assert isinstance(doc_edit, lsp.TextDocumentEdit)
    assert doc_edit.text_document.version == 1
    assert all(isinstance(e, lsp.AnnotatedTextEdit) for e in doc_edit.edits)
    annotation = (params.edit.change_annotations or {})["cuda-agent.verified-rewrite"]
    assert annotation.needs_confirmation is True
    assert (
        annotation.label == "Rewrite of saxpy (2.00× faster, simulated GPU, not measured)"
        and rewrite.simulated
    )
    assert apply_edits(text, plain(list(doc_edit.edits))) == rewrite.rewritten
    # applied once: a second Accept (the diff's, after the code action's) is a reason, not an error
    again = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.applyRewrite", [{"runId": result["runId"]}])
        )
    )
    assert (again["applied"], again["reason"]) == (False, "no_rewrite") and len(workspace.applied) == 1


BROKEN = """\
// @cuda-agent sizes n=1000
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
__global__ void broken(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * scale;
}

// @cuda-agent sizes n=1000
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n]
// @cuda-agent arg yy out float[n]
__global__ void misnamed(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""


async def test_errors_are_reported_at_their_file_line(client: LanguageClient, workspace: Workspace) -> None:
    path = workspace.root / "errors.cu"
    path.write_text(BROKEN)
    uri = open_file(client, path)
    lines = BROKEN.splitlines()
    # the original's compile error: at its line and column of the file, not of the kernel
    line = next(i for i, t in enumerate(lines) if "* scale;" in t)
    col = lines[line].index("scale") + 1
    result = await optimize(client, workspace, uri, "broken")
    assert result["status"] == "baseline_failed" and result["optimize"]["history"] == [], result
    assert f'{path}:{line + 1}:{col}: identifier "scale" is undefined' in result["message"]
    bench = await finished(workspace, await start(client, "cudaAgent.benchmark", uri, "broken"))
    assert bench["status"] == "compile_error"
    assert f'{path}:{line + 1}:{col}: identifier "scale" is undefined' in bench["message"]
    # a spec's `arg` line naming no parameter: at that line, naming the argument
    spec_line = next(i for i, t in enumerate(lines) if "arg yy" in t)
    started = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.optimize", [{"uri": uri, "kernel": "misnamed"}])
        )
    )
    assert started["status"] == "error"
    assert f"{path}:{spec_line + 1}: spec error: arg: misnamed has no parameter `yy`" in started["message"]
    assert "did you mean `y`?" in started["message"] and "has no `arg` line" not in started["message"]

    async def spec_diagnostic() -> lsp.Diagnostic:
        while True:
            found = [d for d in client.diagnostics.get(uri, []) if "`yy`" in d.message]
            if found:
                return found[0]
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    diagnostic = await asyncio.wait_for(spec_diagnostic(), 30)
    assert diagnostic.range.start.line == spec_line
    assert not [d for d in client.diagnostics[uri] if "has no `arg` line" in d.message]


@pytest.mark.slow
async def test_cancel_keeps_the_best_so_far_and_a_changed_document_refuses_the_rewrite(
    client: LanguageClient, workspace: Workspace
) -> None:
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    run = asyncio.ensure_future(optimize(client, workspace, uri, "saxpy"))

    async def first_report() -> str:
        while True:
            for token, reports in client.progress_reports.items():
                if any(
                    isinstance(r, lsp.WorkDoneProgressReport) and "best" in (r.message or "") for r in reports
                ):
                    return str(token)
            await asyncio.sleep(0.02)

    token = await asyncio.wait_for(first_report(), 30)
    client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(run, 30)
    assert result["cancelled"] is True
    assert result["status"] == "ok" and "cancelled, best so far kept" in result["message"]
    assert result["rewriteReady"]
    assert isinstance(client.progress_reports[token][-1], lsp.WorkDoneProgressEnd)
    stored = await client.protocol.send_request_async("cudaAgent/results", {"uri": uri})
    assert stored.results[0].results.optimize.attempts < 40  # stopped before the candidate budget

    # the user types while the rewrite waits: it is refused, nothing is sent
    change(client, uri, 2, (0, 0), (0, 0), "// edited\n")
    refused = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.applyRewrite", [{"runId": result["runId"]}])
        )
    )
    assert (refused["applied"], refused["reason"]) == (False, "stale")
    assert "changed since the optimize run" in refused["message"]
    assert workspace.applied == []
    assert any("changed since" in m.message for m in client.messages)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(uri)))
    assert not any(ln.command and ln.command.command == "cudaAgent.applyRewrite" for ln in lenses or [])


async def test_benchmark_and_add_spec_commands(client: LanguageClient, workspace: Workspace) -> None:
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    doc = lsp.TextDocumentIdentifier(uri)
    diags = await diagnostics_for(client, uri)
    result = await finished(workspace, await start(client, "cudaAgent.benchmark", uri, "saxpy"))
    assert result["status"] == "ok" and result["benchmark"]["medianMs"] == pytest.approx(1.0)
    assert result["kind"] == "benchmark" and not result["rewriteReady"]
    assert result["benchmark"]["gbps"] == pytest.approx(
        12 * (1 << 20) / 1e6
    )  # x read, y read and written: 12 bytes/element
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(doc))
    # the lens is short (a long one is clipped in the editor); its tooltip and the hover have the rest
    shown = [ln.command for ln in lenses or [] if ln.command and "GB/s" in ln.command.title]
    expected = f"1 ms · {result['benchmark']['gbps']:.0f} GB/s ({result['benchmark']['pctPeak']:.0f}% of peak) · simulated"
    assert [c.title for c in shown] == [expected], shown
    assert len(shown[0].title) <= 48 and result["simulated"] is True
    assert (shown[0].tooltip or "").startswith(
        "simulated GPU, not measured: 1 ms median (IQR ±1.0%) at n=1048576"
    )
    line = kernel_line(path, "saxpy")
    col = path.read_text().splitlines()[line].index("saxpy")
    hover = await client.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(line, col)))
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    assert "**Last benchmark** simulated GPU, not measured: 1 ms median" in hover.contents.value
    assert "registers" in hover.contents.value  # from the last check

    # a kernel without a spec: the quick fix and the command insert the inferred spec
    scale = kernel_line(path, "scale")
    missing = [d for d in diags if d.code == "missing-spec" and d.range.start.line == scale]
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            doc,
            lsp.Range(lsp.Position(scale, 0), lsp.Position(scale, 0)),
            lsp.CodeActionContext(diagnostics=missing),
        )
    )
    (fix,) = (
        actions or []
    )  # a quick fix that runs cudaAgent.addSpec (lsprotocol's client hook makes it a Command)
    nested = ast.literal_eval(fix.command) if isinstance(fix, lsp.Command) else {}
    assert command_of(fix) == "cudaAgent.addSpec" and nested["arguments"] == [{"uri": uri, "kernel": "scale"}]
    applied = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.addSpec", [{"uri": uri, "kernel": "scale"}])
        )
    )
    assert (applied["applied"], applied["reason"]) == (True, "applied")
    (sent,) = workspace.applied
    (edit,) = sent.edit.document_changes or []
    assert isinstance(edit, lsp.TextDocumentEdit) and edit.text_document.version == 1
    (insert,) = edit.edits
    assert isinstance(insert, lsp.TextEdit) and insert.range.start == lsp.Position(scale, 0)
    assert (
        "// @cuda-agent sizes n=" in insert.new_text
        and "// @cuda-agent arg v inout float[n]" in insert.new_text
    )
    optimize_actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            doc, lsp.Range(lsp.Position(line, 0), lsp.Position(line + 2, 0)), lsp.CodeActionContext([])
        )
    )
    commands = [command_of(a) for a in optimize_actions or []]
    assert commands == ["cudaAgent.optimize", "cudaAgent.benchmark"]


@pytest.mark.slow
async def test_results_made_elsewhere_show_up_and_survive_a_restart(
    client: LanguageClient, workspace: Workspace
) -> None:
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    doc = lsp.TextDocumentIdentifier(uri)
    await diagnostics_for(client, uri)
    before = workspace.lens_refreshes
    # another process (the CLI, a second editor) records a benchmark: written the way the store writes
    from agent.records import BenchmarkRecord
    from server.store import ResultStore

    record = BenchmarkRecord(
        0.25, 0.249, 0.251, 0.008, 5000.0, 116.0, "n=1048576", "NVIDIA H200", "2026-12-02 11:00 UTC"
    )
    ResultStore(workspace.root).put(path, "saxpy", benchmark=record)

    async def refreshed() -> None:
        while workspace.lens_refreshes == before:
            await asyncio.sleep(0.05)

    await asyncio.wait_for(refreshed(), 20)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(doc))
    assert any(ln.command and ln.command.title.startswith("0.25 ms · 5000 GB/s") for ln in lenses or [])

    # a header the file includes changes on disk: the open file is checked again
    header = workspace.root / "gains.cuh"
    header.write_text("#pragma once\nconstexpr float gain = 2.0f;\n")
    text = '#include "gains.cuh"\n' + path.read_text()
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            [lsp.TextDocumentContentChangeWholeDocument(text)],
        )
    )

    async def until(pred: Any) -> None:
        while not pred(client.diagnostics.get(uri, [])):
            await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)

    await asyncio.wait_for(until(lambda ds: not any(d.code == "nvrtc-error" for d in ds)), 30)
    header.write_text("#pragma once\nconstexpr float gains = 2.0f;\n")  # renamed outside the editor
    await asyncio.wait_for(until(lambda ds: any(d.code == "nvrtc-error" for d in ds)), 30)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=ENV))
async def restarted(lsp_client: LanguageClient, tmp_path: Path):
    """A server started on a workspace that already has results from an earlier session."""
    root = tmp_path / "ws"
    root.mkdir()
    shutil.copy(DATA / "lsp_workspace.cu", root / "lsp_workspace.cu")
    from agent.records import OptimizeRecord
    from server.store import ResultStore

    record = OptimizeRecord(
        run_id="r1", outcome="improved", speedup=2.4, speedup_low=2.3, speedup_high=2.5, baseline_ms=1.2,
        baseline_spread=0.01, candidate_ms=0.5, candidate_spread=0.01, sizes=("n=97", "n=1021", "n=1048576"),
        seeds=3, tolerance="dtype default", device="NVIDIA H200", date="2026-12-02 09:00 UTC",
        summary="block size 256", attempts=12, stop_reason="proposer exhausted",
    )  # fmt: skip
    ResultStore(root).put(root / "lsp_workspace.cu", "saxpy", optimize=record)
    lsp_client.feature(lsp.CLIENT_REGISTER_CAPABILITY)(lambda params: None)
    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=root.as_uri()
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.slow
async def test_stored_results_give_hints_after_a_restart(restarted: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "ws" / "lsp_workspace.cu"
    uri = open_file(restarted, path)
    hints = await restarted.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(100, 0))
        )
    )
    (hint,) = hints or []
    assert hint.label == "⚡ 2.40× verified (kernel edited since)"  # no hash recorded: not this code
    assert isinstance(hint.tooltip, lsp.MarkupContent) and "NVIDIA H200" in hint.tooltip.value


GPU_ENV = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_TEST_EXECUTOR")}


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=GPU_ENV))
async def gpu_client(lsp_client: LanguageClient, workspace: Workspace):
    """The server with the real local executor (GPU 0)."""
    answer_server_requests(lsp_client, workspace)
    options = {"executor": {"kind": "local", "gpu": 0}, "budget": {"seconds": 120, "candidates": 24}}
    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"),
        root_uri=workspace.root.as_uri(),
        initialization_options=options,
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.gpu
@pytest.mark.slow
async def test_benchmark_and_optimize_on_the_gpu(gpu_client: LanguageClient, workspace: Workspace) -> None:
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(gpu_client, path)
    bench = await finished(workspace, await start(gpu_client, "cudaAgent.benchmark", uri, "saxpy"), 120)
    assert bench["status"] == "ok", bench
    assert bench["benchmark"]["medianMs"] > 0 and 0 < bench["benchmark"]["pctPeak"] <= 100
    result = await finished(workspace, await start(gpu_client, "cudaAgent.optimize", uri, "saxpy"), 300)
    # saxpy's spec launches blocks of 32 threads: a bigger block alone is reliably faster
    assert result["status"] == "ok", result
    assert result["optimize"]["speedup"] > 1.2
    rewrite = plain(
        await gpu_client.protocol.send_request_async("cudaAgent/rewrite", {"runId": result["runId"]})
    )
    assert rewrite["original"] == path.read_text() and rewrite["rewritten"] != rewrite["original"]
    stored = plain(await gpu_client.protocol.send_request_async("cudaAgent/results", {"uri": uri}))
    (entry,) = stored["results"]
    assert entry["results"]["optimize"] == result["optimize"]  # the run's end carried the stored record
    assert (
        entry["results"]["optimize"]["device"] and entry["results"]["optimize"]["device"] != "simulated GPU"
    )
    assert entry["results"]["benchmark"]["medianMs"] == pytest.approx(bench["benchmark"]["medianMs"])
    hints = await gpu_client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(100, 0))
        )
    )
    (hint,) = hints or []
    assert str(hint.label).startswith("⚡ ") and str(hint.label).endswith("× verified")


@pytest.mark.slow
async def test_settings_from_workspace_configuration(client: LanguageClient, workspace: Workspace) -> None:
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    await diagnostics_for(client, uri)
    assert workspace.statuses and workspace.statuses[-1]["executor"] == "test (simulated GPU)"
    client.set_configuration(
        {"arch": "sm_80", "budget": {"candidates": 2, "seconds": "soon"}}, section="cudaAgent"
    )
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings=None))

    async def logged() -> None:
        while not any("budget.seconds" in m.message for m in client.log_messages):
            await asyncio.sleep(0.05)

    await asyncio.wait_for(logged(), 10)
    warning = next(m for m in client.log_messages if "budget.seconds" in m.message)
    assert warning.type == lsp.MessageType.Warning and "expected a number" in warning.message
    result = await optimize(client, workspace, uri, "saxpy")
    stored = plain(await client.protocol.send_request_async("cudaAgent/results", {"uri": uri}))
    assert result["status"] == "ok" and stored["results"][0]["results"]["optimize"]["attempts"] <= 2
    line = kernel_line(path, "saxpy")
    col = path.read_text().splitlines()[line].index("saxpy")

    async def rechecked_for_sm80() -> str:
        while True:
            hover = await client.text_document_hover_async(
                lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line, col))
            )
            assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
            if "(sm_80)" in hover.contents.value:
                return hover.contents.value
            await asyncio.sleep(0.1)

    assert "registers" in await asyncio.wait_for(rechecked_for_sm80(), 30)
    assert any(s["running"] is not None for s in workspace.statuses)


class RawConnection:
    """JSON-RPC over the server's stdio with no client library in between, to send what no
    well-behaved client would: broken JSON, params of the wrong shape."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0

    def send(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def request(self, method: str, params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.send(
            json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}).encode()
        )
        return await self.response(self.next_id)

    async def response(self, msg_id: int) -> dict[str, Any]:
        assert self.proc.stdout is not None
        while True:
            length = 0
            while (line := await self.proc.stdout.readline()) != b"\r\n":
                assert line, "the server closed its output"
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            msg = json.loads(await self.proc.stdout.readexactly(length))
            if msg.get("id") == msg_id and "method" not in msg:
                return msg  # type: ignore[no-any-return]
            if "method" in msg and "id" in msg:  # a request from the server: answer it
                self.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": None}).encode())


@contextlib.asynccontextmanager
async def raw_server() -> AsyncIterator[tuple[asyncio.subprocess.Process, RawConnection]]:
    """``cuda-agent serve`` started, initialized over a :class:`RawConnection`, killed after."""
    proc = await asyncio.create_subprocess_exec(
        *SERVER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=ENV
    )
    conn = RawConnection(proc)
    try:
        init = await asyncio.wait_for(
            conn.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}}), 30
        )
        assert "capabilities" in init["result"]
        conn.send(b'{"jsonrpc": "2.0", "method": "initialized", "params": {}}')
        yield proc, conn
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_malformed_messages_get_errors_and_the_server_lives(tmp_path: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        *SERVER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=ENV
    )
    conn = RawConnection(proc)
    try:
        init = await conn.request("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        assert "capabilities" in init["result"]
        conn.send(b'{"jsonrpc": "2.0", "id": 99, "method": "textDocument/hover", "params": {')  # not JSON
        conn.send(b"\xff\xfe\x00 binary garbage")
        for method, params in (
            ("textDocument/hover", {"textDocument": 5, "position": "here"}),
            ("textDocument/codeLens", {}),
            ("textDocument/didOpen", {"textDocument": {"uri": 7}}),
        ):
            reply = await asyncio.wait_for(conn.request(method, params), 10)
            assert reply["error"]["code"] == -32602 and method in reply["error"]["message"]
        unknown = await conn.request("cudaAgent/noSuchMethod", {})
        assert unknown["error"]["code"] == -32601
        path = tmp_path / "k.cu"
        text = (DATA / "lsp_workspace.cu").read_text()
        item = {"uri": path.as_uri(), "languageId": "cuda", "version": 1, "text": text}
        conn.send(
            json.dumps(
                {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": item}}
            ).encode()
        )
        symbols = await conn.request("textDocument/documentSymbol", {"textDocument": {"uri": path.as_uri()}})
        assert [s["name"] for s in symbols["result"]][:2] == ["saxpy", "scale"]
        assert (await conn.request("shutdown", None))["result"] is None
        conn.send(b'{"jsonrpc": "2.0", "method": "exit"}')
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=ENV))
async def plain_client(lsp_client: LanguageClient, workspace: Workspace):
    """A client like eglot or Neovim: no work-done progress, no custom notifications handled."""
    answer_server_requests(lsp_client, workspace)
    params = lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(),
        root_uri=workspace.root.as_uri(),
        initialization_options={"diagnosticsDelayMs": 50},
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.slow
async def test_without_progress_support_a_run_logs_and_is_cancelled_by_command(
    plain_client: LanguageClient, workspace: Workspace
) -> None:
    client = plain_client
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    run_id = await start(client, "cudaAgent.optimize", uri, "saxpy")
    busy = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.optimize", [{"uri": uri, "kernel": "saxpy"}])
        )
    )
    assert (busy["status"], busy["runId"]) == ("busy", run_id)
    assert not client.progress_reports

    async def logged(part: str) -> None:
        while not any(part in m.message for m in client.log_messages):
            await asyncio.sleep(0.02)

    await asyncio.wait_for(logged("Optimizing saxpy: "), 30)  # progress as log lines
    (shown,) = [m.message for m in client.messages]
    assert f"run {run_id}" in shown and "cudaAgent.cancel" in shown
    # while it runs, the kernel's lens and code action offer Cancel
    line = kernel_line(path, "saxpy")
    doc = lsp.TextDocumentIdentifier(uri)
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(doc))
    assert any(ln.command and ln.command.command == "cudaAgent.cancel" for ln in lenses or [])
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            doc, lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)), lsp.CodeActionContext([])
        )
    )
    assert [command_of(a) for a in actions or []] == ["cudaAgent.cancel"]

    cancelled = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.cancel", [{"runId": run_id}])
        )
    )
    assert cancelled["cancelled"] is True
    result = await finished(workspace, run_id)
    assert result["cancelled"] is True and "cancelled" in result["message"]
    stored = plain(await client.protocol.send_request_async("cudaAgent/results", {"uri": uri}))
    record = stored["results"][0]["results"]["optimize"]
    assert record["stopReason"] == "cancelled" and record["attempts"] < 40
    assert any(m.message.startswith("CUDA Agent: Optimizing saxpy: ") for m in client.messages[1:])
    again = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.cancel", [{"runId": run_id}])
        )
    )
    assert again["cancelled"] is False and "no run" in again["message"]


async def test_hostile_specs_answer_lenses_hover_and_diagnostics(
    client: LanguageClient, workspace: Workspace
) -> None:
    """One kernel's hostile spec (``min(x)``, ``cdiv(1e999, 2)``, a 400-digit size, an infinite
    tolerance, a grid or shared memory beyond the device) is a spec error at its line; the other
    kernels of the file keep their lenses and hover."""
    path = workspace.copy("hostile_specs.cu")
    uri = open_file(client, path)
    doc = lsp.TextDocumentIdentifier(uri)
    lines = path.read_text().splitlines()
    lenses = await client.text_document_code_lens_async(lsp.CodeLensParams(doc))
    assert lenses is not None
    titles: dict[int, list[str]] = {}
    for lens in lenses:
        assert lens.command is not None
        titles.setdefault(lens.range.start.line, []).append(lens.command.title)
    for good in ("good_first", "good_last"):
        assert titles[kernel_line(path, good)] == ["▶ Benchmark", "⚡ Optimize", "◔ Profile"]
    hostile = [
        ("one_arg_min", "min(4096)"),
        ("infinite_cdiv", "cdiv(1e999, 2)"),
        ("subnormal_cdiv", "cdiv(1, 1e-320)"),
        ("huge_integer", "n=1000000"),
        ("bad_tolerance", "atol=1e999"),
        ("grid_too_big", "grid=1<<31"),
        ("grid_y_too_big", "grid=(1, 65536)"),
        ("smem_too_big", "smem=1<<62"),
    ]
    for name, needle in hostile:
        bad_line = next(i for i, t in enumerate(lines) if needle in t)
        [title] = titles[kernel_line(path, name)]
        assert title.startswith(f"⚠ spec error, line {bad_line + 1}:"), (name, title)
    for name in ("good_first", "one_arg_min", "huge_integer", "good_last"):
        line = kernel_line(path, name)
        col = lines[line].index(name) + 1
        hover = await client.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(line, col)))
        assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
        assert ("**Spec**" if name.startswith("good") else "**Spec errors**") in hover.contents.value
    diags = await diagnostics_for(client, uri)
    spec_errors = sorted(d.range.start.line for d in diags if d.code == "spec-error")
    assert spec_errors == sorted(next(i for i, t in enumerate(lines) if n in t) for _, n in hostile)
    for name, _ in [*hostile, ("good_last", "")]:  # code actions over each spec and kernel: answered
        line = kernel_line(path, name)
        span = lsp.Range(lsp.Position(line - 3, 0), lsp.Position(line + 1, 0))
        context = lsp.CodeActionContext(
            diagnostics=[d for d in diags if line - 3 <= d.range.start.line <= line]
        )
        await client.text_document_code_action_async(lsp.CodeActionParams(doc, span, context))


async def test_a_misplaced_spec_is_reported_with_a_quick_fix_that_moves_it(
    client: LanguageClient, workspace: Workspace
) -> None:
    path = workspace.copy("misplaced_spec.cu")
    uri = open_file(client, path)
    diags = await diagnostics_for(client, uri)
    (misplaced,) = [d for d in diags if d.code == "misplaced-spec"]
    assert (misplaced.range.start.line, misplaced.range.end.line) == (1, 3)
    assert "separated from scale2 by `#define SCALE 2.0f`" in misplaced.message
    actions = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri), misplaced.range, lsp.CodeActionContext(diagnostics=[misplaced])
        )
    )
    (fix,) = [
        a for a in actions or [] if isinstance(a, lsp.CodeAction) and a.title.startswith("Move the spec")
    ]
    assert fix.edit is not None and fix.edit.document_changes
    (edit,) = fix.edit.document_changes
    assert isinstance(edit, lsp.TextDocumentEdit)
    moved = apply_edits(path.read_text(), [plain(e) for e in edit.edits])
    doc = Document(moved)
    k = doc.kernel("scale2")
    assert k is not None and spec_mod.parse(k)[0] is not None and not spec_mod.misplaced(doc)


async def test_a_header_kernel_is_inferred_from_its_project(
    client: LanguageClient, workspace: Workspace
) -> None:
    """Issue 25: the kernel in inc/ gets its sizes and launch from src/main.cpp (found through the
    project's compile_commands.json); the hover says how sure the inference is."""
    project = workspace.root / "rowscale"
    shutil.copytree(DATA / "projects" / "rowscale", project)
    path = project / "inc" / "rowscale.cuh"
    uri = open_file(client, path)
    line = kernel_line(path, "scale_rows")
    col = path.read_text().splitlines()[line].index("scale_rows") + 2
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(line, col))
    )
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    assert "**Inferred spec** (high confidence)" in hover.contents.value
    assert "@cuda-agent sizes rows=512 cols=1000" in hover.contents.value
    assert "block=(32, 8)" in hover.contents.value
