"""Unit tests of the language server's parts that need no client: settings, result store, watcher,
positions, the spec snippet, and the fake executor the server's ``test`` mode runs."""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from agent.records import BenchmarkRecord, kernel_hash
from base.secrets import Secret
from cudasrc.source import Document
from sandbox.contract import (
    Budget,
    Candidate,
    EvalOptions,
    EvalRequest,
    KernelSource,
    Launch,
    Problem,
    Status,
)
from sandbox.testing import FakeExecutor
from server.lenses import _snippet
from server.optimize import position_at
from server.settings import parse_settings
from server.store import STORE_DIR, Changes, ResultStore, Watcher


def test_the_worker_url_of_the_environment_applies_when_the_settings_name_no_executor() -> None:
    env = {"CUDA_AGENT_WORKER_URL": "http://127.0.0.1:8765", "CUDA_AGENT_TEST_EXECUTOR": "1"}
    settings, problems = parse_settings({}, env=env)
    assert (settings.executor.kind, settings.executor.url) == ("remote", "http://127.0.0.1:8765")
    assert settings.executor.token == Secret("env:CUDA_AGENT_TOKEN")
    assert problems == (
        "executor: CUDA_AGENT_TEST_EXECUTOR is set, but so is the remote worker http://127.0.0.1:8765: "
        "evaluating there (to simulate there: `cuda-agent worker --simulate`)",
    )
    # settings that name an executor win (VS Code always sends executor.kind)
    local, _ = parse_settings({"executor": {"kind": "local"}}, env={"CUDA_AGENT_WORKER_URL": "http://x:1"})
    assert local.executor.kind == "local"
    named, _ = parse_settings(
        {"machine": {"executor": {"token": "file:/t"}}}, env={"CUDA_AGENT_WORKER_URL": "http://x:1"}
    )
    assert (named.executor.kind, named.executor.token) == ("remote", Secret("file:/t"))


def test_settings_parse_nested_values_and_report_problems() -> None:
    settings, problems = parse_settings(
        {
            "executor": {"kind": "remote"},
            "proposer": {"kind": "llm", "model": "qwen"},
            "machine": {
                "executor": {"url": "https://gpu:8765", "token": "env:TOKEN"},
                "proposer": {"endpoint": "http://localhost:8000/v1"},
            },
            "budget": {"seconds": 30, "candidates": 0},
            "arch": "sm_80",
            "includePaths": ["/opt/include"],
            "defines": ["USE_FAST=1", 3],
            "colour": "blue",
        },
        env={"TOKEN": "s3cret"},
    )
    assert (
        settings.executor.kind == "remote" and settings.executor.token.resolve() == ""
    )  # env is the process's
    assert settings.executor.token == Secret("env:TOKEN") and settings.executor.url == "https://gpu:8765"
    assert settings.proposer.model == "qwen" and settings.proposer.endpoint == "http://localhost:8000/v1"
    assert settings.budget.seconds == 30.0
    assert settings.budget.candidates == 40  # 0 is below the minimum: default kept
    assert settings.arch == "sm_80"
    assert (
        settings.include_paths == ("/opt/include",) and settings.defines == ()
    )  # the bad list is dropped whole
    assert any(p.startswith("budget.candidates") for p in problems)
    assert any(p.startswith("defines") for p in problems)
    assert "colour: unknown setting" in problems


def test_settings_reject_literal_secrets_and_honour_the_test_executor_env() -> None:
    settings, problems = parse_settings(
        {"executor": {"kind": "local"}, "machine": {"executor": {"token": "hunter2"}}}, env={}
    )
    assert settings.executor.token == Secret()
    assert any("env:NAME or file:PATH" in p for p in problems)
    forced, _ = parse_settings({"executor": {"kind": "local"}}, env={"CUDA_AGENT_TEST_EXECUTOR": "1"})
    assert forced.executor.kind == "test"
    remote = {"executor": {"kind": "remote"}, "machine": {"executor": {"url": "http://127.0.0.1:8765"}}}
    kept, said = parse_settings(remote, env={"CUDA_AGENT_TEST_EXECUTOR": "1"})
    assert kept.executor.kind == "remote"  # a named worker gets the candidates (it may simulate)
    assert any("evaluating there" in p and "cuda-agent worker --simulate" in p for p in said)
    defaults, none = parse_settings("not an object", env={})
    assert defaults.executor.kind == "local" and none


def test_routes_outside_the_machine_object_are_ignored_with_a_problem() -> None:
    """What a workspace can write (the top-level ``cudaAgent`` section) never picks a URL or a
    secret source: only ``machine`` (user or machine settings) and the server's environment do."""
    hostile = {
        "executor": {
            "kind": "remote",
            "url": "http://evil:1",
            "token": "file:/etc/passwd",
            "rayAddress": "evil:1",
        },
        "proposer": {"kind": "llm", "endpoint": "http://evil:2/v1", "apiKey": "env:AWS_SECRET_ACCESS_KEY"},
    }
    settings, problems = parse_settings(hostile, env={})
    assert settings.executor.url == settings.executor.ray_address == settings.proposer.endpoint == ""
    assert settings.executor.token == Secret() and settings.proposer.api_key == Secret("env:OPENAI_API_KEY")
    ignored = [p for p in problems if "ignored" in p and "never from a workspace" in p]
    assert len(ignored) == 5, problems
    env_url, _ = parse_settings(hostile, env={"CUDA_AGENT_WORKER_URL": "http://mine:1"})
    assert (
        env_url.executor.url == ""
    )  # the settings name an executor kind: the environment's worker is not it


def test_secret_from_file(tmp_path: Path) -> None:
    f = tmp_path / "token"
    f.write_text("abc123\nignored\n")
    assert Secret(f"file:{f}").resolve() == "abc123"
    assert Secret(f"file:{tmp_path / 'missing'}").resolve() == ""


def _bench(ms: float) -> BenchmarkRecord:
    return BenchmarkRecord(
        ms, ms * 0.99, ms * 1.01, 0.02, 900.0, 21.0, "n=1048576", "H200", "2026-12-02 10:00 UTC"
    )


def test_store_round_trips_atomically_and_survives_a_restart(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    src = tmp_path / "src" / "k.cu"
    store.put(src, "saxpy", benchmark=_bench(1.5))
    path = tmp_path / STORE_DIR / "results.json"
    data = json.loads(path.read_text())
    assert data["files"]["src/k.cu"]["saxpy"]["benchmark"]["median_ms"] == 1.5
    # no temp files left behind; the folder keeps itself out of version control
    assert sorted(p.name for p in path.parent.iterdir()) == [".gitignore", "results.json"]
    assert not store.reload()  # our own write is not an outside change
    again = ResultStore(tmp_path)
    assert again.get(src, "saxpy").benchmark == _bench(1.5)
    assert again.get(src, "other").benchmark is None


def test_store_reload_sees_outside_changes_and_ignores_corrupt_files(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    src = tmp_path / "k.cu"
    store.put(src, "saxpy", benchmark=_bench(1.0))
    other = ResultStore(tmp_path)
    other.put(src, "saxpy", benchmark=_bench(2.0))
    assert store.reload()
    assert store.get(src, "saxpy").benchmark == _bench(2.0)
    (tmp_path / STORE_DIR / "results.json").write_text("{not json")
    assert not store.reload()
    assert store.get(src, "saxpy").benchmark == _bench(2.0)
    assert ResultStore(tmp_path).all() == {}


async def test_watcher_batches_outside_changes(tmp_path: Path) -> None:
    got: list[Changes] = []
    fired = asyncio.Event()

    def on_change(c: Changes) -> None:
        got.append(c)
        fired.set()

    watcher = Watcher(tmp_path, asyncio.get_running_loop(), on_change, quiet_s=0.2)
    watcher.start()  # its watches are in place when it returns
    try:
        (tmp_path / "a.cu").write_text("// a\n")
        (tmp_path / "b.cuh").write_text("// b\n")
        (tmp_path / "notes.txt").write_text("ignored\n")
        (tmp_path / STORE_DIR).mkdir()
        (tmp_path / STORE_DIR / "results.json").write_text("{}")
        await asyncio.wait_for(fired.wait(), 10)
        fired.clear()
        # a later change comes after every event of the burst (inotify keeps their order): its batch
        # holds it alone only if the whole burst went into the first batch
        (tmp_path / "z.cu").write_text("// z\n")
        await asyncio.wait_for(fired.wait(), 10)
    finally:
        watcher.stop()
    assert len(got) == 2
    assert got[0].results
    assert {p.name for p in got[0].sources} == {"a.cu", "b.cuh"}
    assert not got[1].results and {p.name for p in got[1].sources} == {"z.cu"}


def test_kernel_hash_follows_the_kernel_text_only() -> None:
    a = Document("// x\n__global__ void k(float* p) { p[0] = 1; }\n")
    b = Document("// y\n\n__global__ void k(float* p) { p[0] = 1; }\n")
    c = Document("__global__ void k(float* p) { p[0] = 2; }\n")
    ha, hb, hc = (kernel_hash(d, d.kernels[0]) for d in (a, b, c))
    assert ha == hb != hc


def test_position_at_counts_utf16_units() -> None:
    text = "ab\nα𝛼x\n"
    assert position_at(text, 0).line == 0
    p = position_at(text, text.index("x"))
    assert (p.line, p.character) == (1, 3)  # α is one unit, 𝛼 two


def test_spec_snippet_makes_each_directive_a_tab_stop() -> None:
    text = "// Benchmark spec inferred ($cheap)\n// @cuda-agent sizes n=1<<20\n// @cuda-agent arg x in float[n] uniform(-1, 1)\n"
    snippet = _snippet(text)
    assert snippet.splitlines() == [
        "// Benchmark spec inferred (\\$cheap)",
        "// @cuda-agent sizes ${1:n=1<<20}",
        "// @cuda-agent arg ${2:x in float[n] uniform(-1, 1)}",
        "$0",
    ]


def _request(candidates: int) -> EvalRequest:
    base = KernelSource("__global__ void k(float* p) {}", "k")
    problem = Problem("n=4", {"n": 4}, (), Launch((1, 1, 1), (32, 1, 1)), bytes_moved=4_000_000)
    cands = tuple(Candidate(f"c{i}", KernelSource(base.source + f"// {i}", "k")) for i in range(candidates))
    cands += (Candidate("same", base),)
    return EvalRequest("r", base, cands, (problem,), problem, (1, 2), None, Budget(), EvalOptions())


def test_fake_executor_is_deterministic_and_honours_cancel() -> None:
    ex = FakeExecutor(speedup=2.0, baseline_ms=1.0)
    result = ex.evaluate(_request(2))
    assert result.baseline.status is Status.OK and result.baseline.timing is not None
    assert [c.speedup for c in result.candidates] == [2.0, 2.0, 1.0]
    assert 1.9 < result.candidates[0].speedup_low < 2.0 < result.candidates[0].speedup_high
    assert len(result.candidates[0].checks) == 2
    assert result.candidates[0].achieved_gbps == pytest.approx(8.0)
    slow = FakeExecutor(delay_s=0.05)
    cancel = threading.Event()
    progress: list[int] = []

    def on_progress(p: object) -> None:
        progress.append(1)
        cancel.set()

    result = slow.evaluate(_request(5), progress=on_progress, cancel=cancel)
    assert [c.status for c in result.candidates] == [Status.OK] + [Status.CANCELLED] * 5
    assert progress == [1]


def test_the_simulated_gpu_still_compiles() -> None:
    """Code that does not compile is a compile_error with NVRTC's message, not a verified speedup."""
    request = _request(1)
    typo = KernelSource("__global__ void k(float* p) { p[0] = undefined_name; }", "k")
    broken = replace(request, candidates=(Candidate("typo", typo), *request.candidates))
    result = FakeExecutor().evaluate(broken)
    assert result.baseline.status is Status.OK
    assert [c.status for c in result.candidates] == [Status.COMPILE_ERROR, Status.OK, Status.OK]
    assert "undefined_name" in result.candidates[0].message and result.candidates[0].message.startswith(
        "line 1:"
    )
    failed = FakeExecutor().evaluate(replace(request, baseline=typo))
    assert failed.baseline.status is Status.COMPILE_ERROR and "undefined_name" in failed.baseline.message
    assert all(c.status is Status.CANCELLED for c in failed.candidates)


def test_outline_has_kernel_parameters_functions_macros_and_constants() -> None:
    from lsprotocol import types as lsp

    from server.lsp import OpenDocument
    from server.symbols import document_symbols

    src = (
        "#define N 256\n"
        "#define SQ(x) ((x)*(x))\n"
        "__constant__ float coeffs[16], bias = 1;\n"
        "namespace ns { __device__ float f(float x) { return x; } }\n"
        "__global__ void k(float* __restrict__ p, int n) { p[0] = SQ(coeffs[0]); }\n"
        "int main() { return 0; }\n"
    )
    od = OpenDocument("file:///a.cu", 1, Path("a.cu"), Document(src, "a.cu"), src)
    symbols = document_symbols(od)
    assert [(s.name, s.kind, s.detail) for s in symbols] == [
        ("N", lsp.SymbolKind.Constant, "#define"),
        ("SQ", lsp.SymbolKind.Constant, "#define"),
        ("coeffs", lsp.SymbolKind.Constant, "__constant__ float"),
        ("bias", lsp.SymbolKind.Constant, "__constant__ float"),
        ("f", lsp.SymbolKind.Function, "__device__"),
        ("k", lsp.SymbolKind.Function, "__global__ (float* __restrict__, int)"),
        ("main", lsp.SymbolKind.Function, "host"),
    ]
    kernel = symbols[5]
    assert [(c.name, c.detail, c.kind) for c in kernel.children or []] == [
        ("p", "float* __restrict__", lsp.SymbolKind.Variable),
        ("n", "int", lsp.SymbolKind.Variable),
    ]
    assert all(kernel.range.start.line == c.range.start.line == 4 for c in kernel.children or [])


def test_client_log_drops_pygls_cancel_chatter_and_keeps_the_rest() -> None:
    import logging

    from lsprotocol import types as lsp

    from server.lsp import ClientLogHandler

    class Loop:
        def __init__(self) -> None:
            self.sent: list[str] = []

        def call_soon(self, fn: object, *args: lsp.LogMessageParams) -> None:
            self.sent.append(args[0].message)

    stub = Loop()
    handler = ClientLogHandler(stub)  # type: ignore[arg-type]
    pygls_log = logging.getLogger("pygls.protocol.json_rpc")
    for msg, args in (
        ('Cancel notification for unknown message id "%s"', (7,)),
        ("Failed to handle %s", ("x",)),
    ):
        handler.emit(pygls_log.makeRecord(pygls_log.name, logging.WARNING, __file__, 1, msg, args, None))
    assert stub.sent == ["pygls.protocol.json_rpc: Failed to handle x"]
