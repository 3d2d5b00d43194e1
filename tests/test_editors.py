"""Neovim and Emacs (eglot) drive the real server headless, as their users would: an Optimize
longer than 15 s with progress, its result applied with one confirmation, and a cancel.  Then an
LSP client (pytest-lsp, with Neovim's capabilities and no settings) runs Optimize and Benchmark
several times in a row on a simulated worker on loopback, named by ``CUDA_AGENT_WORKER_URL``.

The server runs the simulated GPU (``CUDA_AGENT_TEST_EXECUTOR=1``) with a per-candidate delay.
Each editor test skips, with the reason, when its editor is not installed (``.ci/run`` installs
Debian's ``neovim``, ``emacs-nox`` and ``elpa-eglot``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, client_capabilities
from simulated_worker import simulated_worker
from test_server_lsp import plain

ROOT = Path(__file__).parent.parent
EDITORS = Path(__file__).parent / "editors"
FIXTURE = ROOT / "extension" / "e2e" / "fixture" / "saxpy.cu"
DELAY_S = "0.45"  # per candidate: 40 candidates make a run of ~20 s

pytestmark = pytest.mark.slow


def run_editor(argv: list[str], tmp_path: Path, timeout: float = 240) -> tuple[dict[str, Any], Path, str]:
    work = tmp_path / "ws"
    work.mkdir()
    cu = work / "saxpy.cu"
    shutil.copy(FIXTURE, cu)
    out = tmp_path / "out.json"
    env = {
        **os.environ,
        "CUDA_AGENT_TEST_EXECUTOR": "1",
        "CUDA_AGENT_TEST_EXECUTOR_DELAY": DELAY_S,
        "CUDA_AGENT_FILE": str(cu),
        "CUDA_AGENT_PYTHON": sys.executable,
        "CUDA_AGENT_OUT": str(out),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "HOME": str(tmp_path),  # no user configuration
    }
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.exists(), f"{argv[0]} wrote no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    result = json.loads(out.read_text())
    assert not result.get("error"), f"{result['error']}\n{proc.stderr[-3000:]}"
    return result, cu, FIXTURE.read_text()


def check_flow(result: dict[str, Any], cu: Path, original: str) -> None:
    # the command answered at once; the run went on for more than 15 s and finished with a rewrite
    assert result["started"]["status"] == "started" and result["answered_s"] < 5
    assert result["optimize_s"] > 15, result["optimize_s"]
    finished = result["finished"]
    assert finished["rewriteReady"] and finished["optimize"]["speedup"] == pytest.approx(2.0), finished
    # applied: the buffer has the rewrite, the spec's launch line and the launch site agree; not saved
    assert result["actions"][0].startswith("Apply verified rewrite of saxpy (2.00× faster, simulated GPU")
    assert result["applied"]["applied"] is True
    text = result["text"]
    spec = re.search(r"@cuda-agent launch grid=.+ block=(\d+)", text)
    site = re.search(r"saxpy<<<.+, (\d+)>>>", text)
    assert spec and site and spec[1] == site[1] != "32", text
    assert cu.read_text() == original, "applying edits the buffer; it does not save"
    # the second run was cancelled by command
    assert result["cancel"]["cancelled"] is True
    assert result["cancelled"]["cancelled"] is True and "cancelled" in result["cancelled"]["message"]


@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim is not installed (apt-get install neovim)")
def test_neovim_optimize_apply_and_cancel(tmp_path: Path) -> None:
    script = EDITORS / "nvim_flow.lua"
    result, cu, original = run_editor(
        ["nvim", "--headless", "-u", "NONE", "-c", f"luafile {script}"], tmp_path
    )
    check_flow(result, cu, original)
    assert result["modified"] is True
    # Neovim announces work-done progress: begin, reports with percentages, end
    kinds = [p["kind"] for p in result["progress"]]
    assert result["work_done_progress"] is True
    assert kinds[0] == "begin" and "report" in kinds and "end" in kinds
    assert any("candidates tried" in (p.get("message") or "") for p in result["progress"])


@pytest.mark.skipif(
    shutil.which("emacs") is None, reason="Emacs is not installed (apt-get install emacs-nox elpa-eglot)"
)
def test_emacs_eglot_optimize_apply_and_cancel(tmp_path: Path) -> None:
    script = EDITORS / "eglot_flow.el"
    probe = subprocess.run(
        ["emacs", "--batch", "--eval", "(require 'eglot)"],  # site-start: Debian's elpa packages
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(
            f"eglot is not available to Emacs (Emacs 29+, or Debian's elpa-eglot): {probe.stderr.strip()[-200:]}"
        )
    result, cu, original = run_editor(["emacs", "--batch", "-l", str(script)], tmp_path)
    check_flow(result, cu, original)
    assert result["modified"] is True
    assert result["confirmations"] == 1  # eglot asks once before applying a server's edit
    # no work-done progress in eglot 1.9: progress as log lines, start and end as messages
    assert any(re.match(r"Optimizing saxpy: \d+% · \d+ candidates? tried", m) for m in result["log"])
    assert any("cudaAgent.cancel" in m for m in result["messages"])
    assert any(
        m.startswith("CUDA Agent: Optimizing saxpy: simulated GPU, not measured: 2.00× faster")
        for m in result["messages"]
    )


class Session:
    """The real server driven by an LSP client with Neovim's capabilities and no settings, on a copy
    of the fixture: ``run`` starts a command on ``saxpy`` and returns its ``runFinished``."""

    def __init__(self, client: Any, uri: str) -> None:
        self.client = client
        self.uri = uri
        self.finished: dict[str, Any] = {}
        self.statuses: list[Any] = []
        client.feature("cudaAgent/runFinished")(lambda p: self.finished.__setitem__(p.runId, plain(p)))
        client.feature("cudaAgent/status")(lambda p: self.statuses.append(plain(p)))
        client.feature(lsp.CLIENT_REGISTER_CAPABILITY)(lambda p: None)

    async def run(self, command: str, timeout: float = 60) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            started = plain(
                await self.client.workspace_execute_command_async(
                    lsp.ExecuteCommandParams(command, [{"uri": self.uri, "kernel": "saxpy"}])
                )
            )
            assert started["status"] == "started", started
            while started["runId"] not in self.finished:
                await asyncio.sleep(0.05)
            return self.finished[started["runId"]]  # type: ignore[no-any-return]

        return await asyncio.wait_for(go(), timeout)


@contextlib.asynccontextmanager
async def session(tmp_path: Path, env: dict[str, str]) -> AsyncIterator[Session]:
    work = tmp_path / "ws"
    work.mkdir()
    cu = work / "saxpy.cu"
    shutil.copy(FIXTURE, cu)
    env = {**env, "PYTHONPATH": str(ROOT)}
    client = await ClientServerConfig([sys.executable, "-m", "server", "serve"], server_env=env).start()
    try:
        s = Session(client, cu.as_uri())
        await client.initialize_session(
            lsp.InitializeParams(capabilities=client_capabilities("neovim"), root_uri=work.as_uri())
        )
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(s.uri, "cuda", 1, cu.read_text()))
        )
        yield s
        await asyncio.wait_for(client.shutdown_session(), 30)
    finally:
        await asyncio.wait_for(client.stop(), 30)


async def test_remote_flow_from_the_editor_several_runs_in_a_row(tmp_path: Path) -> None:
    """The server sends every run to the worker that ``CUDA_AGENT_WORKER_URL`` names (the client
    sends no settings), even with local simulation asked for; runs follow each other without a
    restart, and the worker logs each request's outcome."""
    with simulated_worker(tmp_path, "editor-loopback-token") as worker:
        async with session(tmp_path, {**worker.client_env(), "CUDA_AGENT_TEST_EXECUTOR": "1"}) as s:
            results = [await s.run(c) for c in ["cudaAgent.optimize", "cudaAgent.benchmark"] * 3]
        log = worker.log.read_text()
    for r in results[0::2]:  # the optimize runs
        assert r["status"] == "ok" and r["rewriteReady"] and r["optimize"]["speedup"] == pytest.approx(2.0), r
    for r in results[1::2]:  # the benchmarks
        assert r["status"] == "ok" and r["benchmark"]["medianMs"] > 0, r
    assert any(
        st["executor"] == f"remote {worker.url}" and st["device"] == "simulated GPU" for st in s.statuses
    )
    said = [m.message for m in s.client.log_messages]
    assert any(f"so is the remote worker {worker.url}: evaluating there" in m for m in said), said
    assert log.count(": done") >= 6 and "refused" not in log and "failed" not in log, log


async def test_without_a_gpu_the_editor_names_the_cause_and_the_ways_forward(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_")}
    env["CUDA_VISIBLE_DEVICES"] = ""  # also on a GPU machine: no device visible
    async with session(tmp_path, env) as s:
        result = await s.run("cudaAgent.benchmark")
    assert result["status"] == "error" and "no usable GPU" in result["message"], result
    (popup,) = [m.message for m in s.client.messages if m.type == lsp.MessageType.Error]
    assert popup.startswith("CUDA Agent: cannot benchmark saxpy: no usable GPU 0")
    assert any(
        c in popup for c in ("is not installed", "no NVIDIA driver", "driver is older", "finds no GPU")
    )
    assert "the `gpu` extra" in popup and "remote `cuda-agent worker`" in popup
    assert "the simulated GPU to try the flow (executor.kind test)" in popup
