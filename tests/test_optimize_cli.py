"""`cuda-agent optimize` end to end on a CPU-only machine: the simulated GPU executor
(``CUDA_AGENT_TEST_EXECUTOR=1``) and the scripted LLM server; user mistakes and "no GPU"."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from loop_fakes import SAXPY, saxpy_target, variant
from scripted_llm import Call, Fail, Say, ScriptedLLM

from server.cli.main import main

T = saxpy_target()
SCRIPT = [
    Call(
        (
            (
                "verify_and_time",
                {"code": variant(T, "wider blocks"), "block": "256", "assumptions": ["x and y never alias"]},
            ),
        )
    ),
    Say("done"),
]


@pytest.fixture
def cu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("CUDA_AGENT_TEST_EXECUTOR", "1")
    return Path(shutil.copy(SAXPY, tmp_path / "saxpy.cu"))


def llm_args(server: ScriptedLLM) -> list[str]:
    return ["--proposer", "llm", "--llm-url", server.url, "--model", "coder", "--samples", "1"]


def test_json_write_keeps_a_backup_and_edits_the_launch_site(
    cu: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    original = cu.read_text()
    with ScriptedLLM(SCRIPT) as server:
        rc = main(["optimize", str(cu), "--json", "--write", *llm_args(server)])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    record = out["record"]
    assert record["outcome"] == "improved" and record["speedup"] == pytest.approx(2.0)
    assert record["speedup_low"] < 2.0 < record["speedup_high"]
    assert out["assumptions"] == ["x and y never alias"]
    assert out["launch"] == {"grid": None, "block": "256", "shared": None}
    assert [v["label"] for v in out["verification"]] == ["n=1000", "n=4097"]
    assert out["written"] == str(cu) and Path(out["backup"]).read_text() == original
    text = cu.read_text()
    assert "// wider blocks" in text and "saxpy<<<(n + (256 - 1)) / 256, 256>>>(n, 2.0f, x, y);" in text
    lines = Path(out["trajectory"]).read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["reward"] > 2


def test_a_simulated_run_writes_its_records_only_to_a_file_of_its_own(
    cu: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CUDA_AGENT_TEST_EXECUTOR")
    real = cu.parent / "xdg" / "cuda-agent" / "trajectories.jsonl"
    real.parent.mkdir(parents=True)
    real.write_text('{"measured": "a line of the user\'s own"}\n')
    assert main(["optimize", str(cu), "--simulate", "--budget", "6c", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["record"]["simulated"] is True
    assert real.read_text() == '{"measured": "a line of the user\'s own"}\n'  # untouched
    assert out["trajectory"] == str(real.with_name("trajectories.simulated.jsonl"))
    lines = [json.loads(line) for line in Path(out["trajectory"]).read_text().splitlines()]
    assert len(lines) == out["record"]["attempts"] > 0
    assert all(line["simulated"] is True for line in lines)


def test_diff_prints_a_patch_and_leaves_the_file_alone(cu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = cu.read_text()
    with ScriptedLLM(SCRIPT) as server:
        rc = main(["optimize", str(cu), "--diff", "--trajectory", "off", *llm_args(server)])
    out = capsys.readouterr().out
    assert rc == 0 and cu.read_text() == original
    assert "2.00x" in out and "assumes: x and y never alias" in out
    assert f"--- {cu}\n+++ {cu}\n" in out
    assert "-    saxpy<<<(n + 31) / 32, 32>>>(n, 2.0f, x, y);" in out
    assert not (cu.parent / "xdg").exists()


def test_no_gpu_is_one_line_and_exit_1(
    cu: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("sandbox.local")
    monkeypatch.delenv("CUDA_AGENT_TEST_EXECUTOR")
    from conftest import gpu_unavailable_reason

    if gpu_unavailable_reason() is None:
        pytest.skip("this machine has a GPU")
    rc = main(
        ["optimize", str(cu), "--proposer", "llm", "--llm-url", "http://127.0.0.1:9/v1", "--model", "m"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1
    assert err[0].startswith("cuda-agent: error: no usable GPU")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--budget", "soon"], "--budget soon: bad budget part 'soon'"),
        (["--kernel", "nope"], "no kernel 'nope'"),
        (["--proposer", "llm"], "--proposer llm needs --model"),
        (["--samples", "0"], "Invalid value for '--samples'"),
    ],
)
def test_user_mistakes_are_one_line_exit_2(
    cu: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    needle: str,
) -> None:
    monkeypatch.delenv("CUDA_AGENT_LLM_MODEL", raising=False)
    rc = main(["optimize", str(cu), *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and needle in err[0], err


def test_a_kernel_without_a_spec_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cu = tmp_path / "k.cu"
    cu.write_text("__global__ void k(float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = 0; }\n")
    assert main(["optimize", str(cu)]) == 2
    assert "kernel k has no spec" in capsys.readouterr().err


def test_an_unreachable_endpoint_is_one_line_without_a_traceback(cu: Path) -> None:
    env = {**os.environ, "CUDA_AGENT_TEST_EXECUTOR": "1"}
    args = ["optimize", str(cu), "--proposer", "llm", "--llm-url", "http://127.0.0.1:9/v1", "--model", "m"]
    out = subprocess.run(
        [sys.executable, "-m", "server", *args, "--trajectory", "off"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) <= 2, out.stderr
    assert out.stderr.splitlines()[-1].startswith("cuda-agent: error: proposer failed: cannot reach")


def test_an_endpoint_that_answers_every_request_with_an_http_error_fails_the_run(
    cu: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedLLM(lambda body, n: Fail(501, "Not Implemented")) as server:
        rc = main(["optimize", str(cu), "--trajectory", "off", *llm_args(server)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "answered no request: server error 501" in err.splitlines()[-1]
