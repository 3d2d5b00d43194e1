"""One isolation rule for every process that compiles untrusted code (issue 37): the worker,
``reward serve``, the LLM's ``compile`` tool (CLI and editor) and the simulated GPUs (the
language server's ``test`` executor) compile confined (Landlock or bubblewrap) or refuse to;
``--unsafe-no-isolation`` is the only way past.  The absence of Landlock and bubblewrap is
simulated by making :func:`sandbox.compile_pool.compile_isolation` answer ``none``."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, cast

import pytest
from loop_fakes import SAXPY

import sandbox.compile_pool
import sandbox.testing
from agent.llm import LLMSettings
from sandbox.compile_pool import CompilePool, _Policy
from sandbox.confine import ConfinementError
from server.cli.main import main

KERNEL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n'


@pytest.fixture
def unconfinable(monkeypatch: pytest.MonkeyPatch) -> None:
    """This host as one without Landlock and bubblewrap; no shared simulated pool made earlier."""
    monkeypatch.setattr(sandbox.compile_pool, "compile_isolation", lambda: "none")
    monkeypatch.setattr(_Policy, "unisolated_allowed", False)
    monkeypatch.setattr(sandbox.testing, "_SHARED", [])


@pytest.fixture
def cu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CUDA_AGENT_TEST_EXECUTOR", "1")
    return Path(shutil.copy(SAXPY, tmp_path / "saxpy.cu"))


def refused(err: str) -> bool:
    return "--unsafe-no-isolation" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.usefixtures("unconfinable")
@pytest.mark.parametrize("command", [["worker", "--simulate"], ["reward", "serve", "--simulate"]])
def test_services_refuse_to_serve_unconfined(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "refusing to serve" in err and refused(err)


@pytest.mark.usefixtures("unconfinable")
def test_the_pool_every_untrusted_compile_goes_through_refuses_unconfined() -> None:
    from server.runs import Runs

    with pytest.raises(ConfinementError, match="--unsafe-no-isolation"):
        CompilePool(1)
    with pytest.raises(ConfinementError):  # the language server's simulated GPU (executor kind test)
        sandbox.testing.FakeExecutor()
    with pytest.raises(ConfinementError):  # the editor's LLM `compile` tool
        Runs(cast(Any, None)).compiler()
    from server.cli.optimize import _make_proposer

    with pytest.raises(ConfinementError):  # the CLI's LLM `compile` tool
        _make_proposer("llm", LLMSettings(base_url="http://127.0.0.1:9/v1", model="m"))


@pytest.mark.usefixtures("unconfinable")
def test_cli_runs_refuse_unconfined_in_one_line(cu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    llm = ["--proposer", "llm", "--llm-url", "http://127.0.0.1:9/v1", "--model", "m", "--trajectory", "off"]
    for argv in (["bench", str(cu)], ["optimize", str(cu), *llm]):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert err.startswith("cuda-agent: error: refusing to compile untrusted code") and refused(err)


@pytest.mark.usefixtures("unconfinable")
def test_unsafe_no_isolation_is_the_one_way_past(cu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(cu), "--json", "--unsafe-no-isolation"]) == 0, capsys.readouterr().err
    pool = CompilePool(1)  # this process now may: the flag is the process's
    try:
        assert pool.isolation == "none"
        assert pool.submit(KERNEL, name_expressions=("k",)).result(timeout=120).result.ok
    finally:
        pool.close()
