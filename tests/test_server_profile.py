"""Profile from the editor, and the roofline's numbers in stored results: the real language server
over stdio (pytest-lsp, the simulated GPU, which has no Nsight Compute)."""

# ruff: noqa: F811 - test_server_lsp's pytest fixtures (client, workspace) are imported by name

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient
from test_server_lsp import (
    Workspace,
    client,  # noqa: F401 - the pytest-lsp fixture
    finished,
    kernel_line,
    open_file,
    optimize,
    plain,
    start,
    workspace,  # noqa: F401 - fixture
)


async def stored(client: LanguageClient, uri: str) -> dict[str, Any]:
    (entry,) = [
        r
        for r in plain(await client.protocol.send_request_async("cudaAgent/results", {"uri": uri}))["results"]
        if r["kernel"] == "saxpy"
    ]
    return entry["results"]  # type: ignore[no-any-return]


async def test_profile_runs_on_the_kernel_and_its_waiting_rewrite_and_shows_in_hover_and_results(
    client: LanguageClient, workspace: Workspace
) -> None:
    path = workspace.copy("lsp_workspace.cu")
    uri = open_file(client, path)
    doc = lsp.TextDocumentIdentifier(uri)
    assert (await optimize(client, workspace, uri, "saxpy"))["rewriteReady"]
    result = await finished(workspace, await start(client, "cudaAgent.profile", uri, "saxpy"))
    assert result["kind"] == "profile" and result["status"] == "unavailable"
    assert result["message"] == (
        "original: Nsight Compute metrics not available: the simulated GPU has no Nsight Compute; "
        "rewrite: Nsight Compute metrics not available: the simulated GPU has no Nsight Compute"
    )
    record = (await stored(client, uri))["profile"]
    assert [k["label"] for k in record["kernels"]] == ["original", "rewrite"]
    assert record["problem"] == "n=1048576" and record["device"] == "simulated GPU"
    assert record["kernels"][0]["profile"]["available"] is False
    line = kernel_line(path, "saxpy")
    col = path.read_text().splitlines()[line].index("saxpy")
    hover = await client.text_document_hover_async(lsp.HoverParams(doc, lsp.Position(line, col)))
    assert hover is not None and isinstance(hover.contents, lsp.MarkupContent)
    assert "**Last profile** (Nsight Compute, one launch at n=1048576)" in hover.contents.value
    assert "no Nsight Compute" in hover.contents.value


async def test_a_profile_of_a_kernel_without_a_spec_is_refused_at_once(
    client: LanguageClient, workspace: Workspace
) -> None:
    uri = open_file(client, workspace.copy("lsp_workspace.cu"))
    started = plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams("cudaAgent.profile", [{"uri": uri, "kernel": "scale"}])
        )
    )
    assert started["status"] == "error" and "has no spec" in started["message"]


async def test_benchmark_and_optimize_records_carry_the_roofline(
    client: LanguageClient, workspace: Workspace
) -> None:
    uri = open_file(client, workspace.copy("lsp_workspace.cu"))
    await finished(workspace, await start(client, "cudaAgent.benchmark", uri, "saxpy"))
    await optimize(client, workspace, uri, "saxpy")
    entry = await stored(client, uri)
    for roofline in (entry["benchmark"]["roofline"], entry["optimize"]["roofline"]):
        assert roofline["bytesMoved"] == 12 * (1 << 20)  # x read, y read and written
        assert roofline["flops"] == 0  # no `work flops=` line in its spec
        assert roofline["peakGbps"] == 4300.0 and roofline["peakGflops"] == 60000.0
    assert entry["optimize"]["baselineGbps"] == entry["benchmark"]["gbps"] > 0
