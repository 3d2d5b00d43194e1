"""Compare with… in the editor: the real language server over stdio (pytest-lsp), the simulated
executor, a workspace holding tests/data/compare/vadd_pair.cu and vadd_elsewhere.cu."""

# ruff: noqa: F811 - test_server_lsp's pytest fixtures (client, workspace) are imported by name

from __future__ import annotations

import ast
import asyncio
import os
from typing import Any

import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities
from test_server_lsp import (
    SERVER,
    Workspace,
    answer_server_requests,
    client,  # noqa: F401 - the pytest-lsp fixture
    finished,
    kernel_line,
    open_file,
    plain,
    workspace,  # noqa: F401 - fixture
)

SLOW_ENV = {**os.environ, "CUDA_AGENT_TEST_EXECUTOR": "1", "CUDA_AGENT_TEST_EXECUTOR_DELAY": "30"}


def pair(workspace: Workspace) -> tuple[Any, Any]:
    workspace.copy("compare/vadd_elsewhere.cu", "vadd_elsewhere.cu")
    return workspace.copy("compare/vadd_pair.cu", "vadd_pair.cu"), workspace.root / "vadd_elsewhere.cu"


async def actions_at(client: LanguageClient, uri: str, line: int) -> list[tuple[str, dict[str, Any]]]:
    """(title, command) of each code action at ``line`` (see test_server_lsp.command_of for why a
    CodeAction can arrive as a Command whose ``command`` is the nested command's text)."""
    got = await client.text_document_code_action_async(
        lsp.CodeActionParams(
            lsp.TextDocumentIdentifier(uri),
            lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0)),
            lsp.CodeActionContext(diagnostics=[]),
        )
    )
    out = []
    for a in got or []:
        if isinstance(a, lsp.CodeAction):
            command = plain(a.command) if a.command else {}
        else:
            command = ast.literal_eval(a.command) if a.command.startswith("{") else {"command": a.command}
        out.append((a.title, command))
    return out


async def start_compare(client: LanguageClient, uri: str, kernel: str, with_: str) -> dict[str, Any]:
    """The command's answer: ``RunStarted`` (the run goes on in the background)."""
    result = await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams("cudaAgent.compare", [{"uri": uri, "kernel": kernel, "with": with_}])
    )
    return plain(result)  # type: ignore[no-any-return]


async def compare(
    client: LanguageClient, workspace: Workspace, uri: str, kernel: str, with_: str
) -> dict[str, Any]:
    """Start a comparison and wait for its ``cudaAgent/runFinished``."""
    started = await start_compare(client, uri, kernel, with_)
    assert started["status"] == "started" and started["kind"] == "compare", started
    return await finished(workspace, started["runId"])


async def test_compare_with_offers_matching_kernels_runs_with_progress_and_shows_on_both(
    client: LanguageClient,
    workspace: Workspace,
) -> None:
    path, elsewhere = pair(workspace)
    uri = open_file(client, path)
    line = kernel_line(path, "vadd")
    compares = [
        (t, c) for t, c in await actions_at(client, uri, line) if c.get("command") == "cudaAgent.compare"
    ]
    # same parameter list only: vadd_swapped (n first) and vadd_double (doubles) are not offered
    assert [t for t, _ in compares] == [
        "Compare vadd with vadd_x4",
        "Compare vadd with vadd_grid_stride (vadd_elsewhere.cu)",
    ]
    assert compares[1][1]["title"] == "Compare with…"
    assert compares[1][1]["arguments"] == [
        {"uri": uri, "kernel": "vadd", "with": f"{elsewhere.resolve()}:vadd_grid_stride"}
    ]

    result = await compare(client, workspace, uri, "vadd", "vadd_x4")
    assert result["status"] == "ok" and result["kind"] == "compare", result
    record = result["compare"]
    assert record["speedup"] == 2.0 and record["speedupLow"] < 2.0 < record["speedupHigh"]
    assert (record["role"], record["other"], record["status"]) == ("original", "vadd_x4", "ok")
    assert (
        result["message"] == "simulated GPU, not measured: vadd_x4 against vadd: verified, 2.00x [1.96-2.04x]"
    )
    assert result["simulated"] is True
    ((_token, reports),) = [(t, r) for t, r in client.progress_reports.items() if r]
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin) and reports[0].cancellable
    assert reports[0].title == "Comparing vadd with vadd_x4"
    assert isinstance(reports[-1], lsp.WorkDoneProgressEnd) and "verified, 2.00x" in (
        reports[-1].message or ""
    )

    hints = await client.text_document_inlay_hint_async(
        lsp.InlayHintParams(
            lsp.TextDocumentIdentifier(uri), lsp.Range(lsp.Position(0, 0), lsp.Position(100, 0))
        )
    )
    by_line = {h.position.line: h.label for h in hints or []}
    assert by_line[line] == "⇄ vadd_x4: 2.00× verified (simulated GPU, not measured)"
    assert by_line[kernel_line(path, "vadd_x4")] == "⇄ vs vadd: 2.00× verified (simulated GPU, not measured)"

    x4 = kernel_line(path, "vadd_x4")
    col = path.read_text().splitlines()[x4].index("vadd_x4") + 2
    hover = await client.text_document_hover_async(
        lsp.HoverParams(lsp.TextDocumentIdentifier(uri), lsp.Position(x4, col))
    )
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    assert (
        "**Compare** (as a rewrite of **vadd**): **simulated GPU, not measured**: verified, 2\\.00x"
        in hover.contents.value
    )

    stored = plain(await client.protocol.send_request_async("cudaAgent/results", {}))
    compared = {
        (r["kernel"], r["results"]["compare"]["role"], r["results"]["compare"]["other"])
        for r in stored["results"]
        if "compare" in r["results"]
    }
    assert compared == {("vadd", "original", "vadd_x4"), ("vadd_x4", "rewrite", "vadd")}

    # another file's kernel, by the action's own argument
    command = compares[1][1]
    started = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command["command"], command["arguments"])
        )
    )
    other = await finished(workspace, started["runId"])
    assert other["status"] == "ok"
    stored = plain(await client.protocol.send_request_async("cudaAgent/results", {}))
    rows = {
        (r["file"], r["kernel"]): r["results"]["compare"]
        for r in stored["results"]
        if "compare" in r["results"]
    }
    assert rows[("vadd_elsewhere.cu", "vadd_grid_stride")]["other"] == "vadd_pair.cu:vadd"
    assert rows[("vadd_pair.cu", "vadd")]["other"] == "vadd_elsewhere.cu:vadd_grid_stride"


async def test_a_different_parameter_list_is_refused_with_the_reason(
    client: LanguageClient,
    workspace: Workspace,
) -> None:
    path, _ = pair(workspace)
    uri = open_file(client, path)
    result = await start_compare(client, uri, "vadd", "vadd_swapped")
    assert result["status"] == "error" and not result["runId"]
    assert "vadd_swapped cannot replace vadd: parameter 1 `n` is `int`" in result["message"]
    assert not any(r for r in client.progress_reports.values())  # nothing ran


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=SLOW_ENV))
async def slow_client(lsp_client: LanguageClient, workspace: Workspace):
    answer_server_requests(lsp_client, workspace)
    params = lsp.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=workspace.root.as_uri()
    )
    await lsp_client.initialize_session(params)
    yield
    await lsp_client.shutdown_session()


async def test_cancel_from_the_progress_bar_stops_the_comparison(
    slow_client: LanguageClient,
    workspace: Workspace,
) -> None:
    path, _ = pair(workspace)
    uri = open_file(slow_client, path)
    run = asyncio.ensure_future(compare(slow_client, workspace, uri, "vadd", "vadd_x4"))

    async def begun() -> str:
        while True:
            for token, reports in slow_client.progress_reports.items():
                if reports:
                    return str(token)
            await asyncio.sleep(0.02)

    token = await asyncio.wait_for(begun(), 30)
    slow_client.window_work_done_progress_cancel(lsp.WorkDoneProgressCancelParams(token=token))
    result = await asyncio.wait_for(run, 10)  # the simulated candidate would take 30 s
    assert result["status"] == "cancelled" and result["cancelled"] is True
    assert isinstance(slow_client.progress_reports[token][-1], lsp.WorkDoneProgressEnd)
