"""The command line's contract: subcommands listed, user mistakes are one line and non-zero."""

from __future__ import annotations

import subprocess
import sys

import pytest

from server.cli import main

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
