"""Issue 37's smaller holes, each attacked: task paths that never end or block, a capture folder
that cannot be made, secrets in a captured program's environment."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.capture import program_environment
from server.cli.main import main
from server.settings import parse_settings


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_reward_tasks_refuse_devices_and_fifos_at_once(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "tasks.cu")
        os.mkfifo(path)  # nobody writes it: opening it for reading would block forever
    assert main(["reward", "tasks", "--tasks", path]) == 2
    err = capsys.readouterr().err
    assert "not a regular file" in err and len(err.strip().splitlines()) == 1


def test_capture_into_a_folder_that_cannot_be_made_is_one_line() -> None:
    cli = [sys.executable, "-m", "server", "capture", "--save-inputs", "/proc/nonexistent/x", "--", "true"]
    done = subprocess.run(cli, capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent.parent)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        "cuda-agent: error: /proc/nonexistent/x: cannot create the folder for the inputs (No such file or directory)"
    ]


def test_the_editors_captured_program_gets_none_of_our_secrets() -> None:
    settings, _ = parse_settings({"machine": {"proposer": {"apiKey": "env:MY_LLM_KEY"}}}, env={})
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "CUDA_AGENT_TOKEN": "tok",
        "OPENAI_API_KEY": "sk",
        "MY_LLM_KEY": "sk2",
        "CUDA_AGENT_WORKER_URL": "http://w:1",
        "HF_TOKEN": "the user's own",
    }
    env = program_environment(settings, base)
    assert env == {"PATH": "/usr/bin", "HOME": "/home/u", "HF_TOKEN": "the user's own"}
