"""The command line's contract: subcommands listed, user mistakes are one line and non-zero."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from server.cli import main

VADD = Path(__file__).resolve().parents[1] / "bench" / "kernels" / "vadd_poor_block.cu"
SUBCOMMANDS = ("serve", "kernels", "check", "bench", "optimize", "suite", "worker")


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "server", *args], capture_output=True, text=True, timeout=120
    )


def test_help_lists_every_subcommand() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    for sub in SUBCOMMANDS:
        assert f"  {sub} " in out.stdout, sub


@pytest.mark.parametrize(
    "args, needle",
    [
        (("kernels", "/no/such/file.cu"), "/no/such/file.cu: no such file"),
        (("check", "/no/such/file.cu"), "no such file"),
        (("kernels",), "Missing argument"),
        (("kernels", "--bogus", "x.cu"), "No such option"),
        (("nosuchcommand",), "No such command"),
        (("suite", "/no/such/dir"), "no such directory"),
    ],
)
def test_user_mistakes_are_one_line_and_nonzero(args: tuple[str, ...], needle: str) -> None:
    out = run_cli(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("cuda-agent: error:")
    assert needle in lines[0]
    assert "Traceback" not in out.stderr


def test_directory_instead_of_file(tmp_path) -> None:
    assert main(["kernels", str(tmp_path)]) == 2


def test_bench_without_gpu_is_one_line_with_the_remote_hint(monkeypatch) -> None:
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("CUDA_AGENT_")}
    env["CUDA_VISIBLE_DEVICES"] = ""  # also on a GPU machine: no device visible
    out = subprocess.run(
        [sys.executable, "-m", "server", "bench", str(VADD)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert "no usable GPU" in line and "CUDA_AGENT_WORKER_URL" in line


def test_bench_reports_timing_and_bandwidth_from_the_executor() -> None:
    env = {**__import__("os").environ, "CUDA_AGENT_TEST_EXECUTOR": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "server", "bench", str(VADD), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    import json

    data = json.loads(out.stdout)
    assert data["kernel"] == "vadd" and data["result"]["status"] == "ok"
    assert data["result"]["timing"]["median_ms"] > 0 and data["result"]["achieved_gbps"] > 0
