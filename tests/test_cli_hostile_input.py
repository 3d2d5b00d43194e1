"""Issue 28's smaller CLI items: hostile arguments and files are one clear line and exit status 2,
never a traceback or a hang; ``--write`` keeps read-only files, hard links and CRLF line ends."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from server.cli.common import JobFailed
from server.cli.files import write_rewrite

SAXPY = (Path(__file__).parent.parent / "bench" / "kernels" / "saxpy.cu").read_text()


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_")}
    env["CUDA_AGENT_TEST_EXECUTOR"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "server", *args],
        capture_output=True,
        text=True,
        timeout=60,  # a hang fails the test instead of stalling the suite
        cwd=cwd,
        env={**env, "PYTHONPATH": os.pathsep.join(sys.path)},
        stdin=subprocess.DEVNULL,
    )


def one_clear_line(out: subprocess.CompletedProcess[str], needle: str) -> None:
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in out.stderr, out.stderr


@pytest.fixture
def saxpy(tmp_path: Path) -> Path:
    path = tmp_path / "saxpy.cu"
    path.write_text(SAXPY)
    return path


def test_a_400_digit_budget_is_one_line(saxpy: Path, tmp_path: Path) -> None:
    one_clear_line(cli("optimize", str(saxpy), "--budget", "9" * 400 + "c", cwd=tmp_path), "too large")


def test_a_missing_api_key_file_is_one_line_before_anything_runs(saxpy: Path, tmp_path: Path) -> None:
    args = ("optimize", str(saxpy), "--proposer", "llm", "--model", "m", "--api-key-file", "/nonexistent")
    one_clear_line(cli(*args, cwd=tmp_path), "/nonexistent: no such file")


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_given_as_the_file_is_one_line(device: str, tmp_path: Path) -> None:
    one_clear_line(cli("kernels", device, cwd=tmp_path), "not a regular file")


def test_a_fifo_given_as_the_file_is_one_line_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "kernel.cu"
    os.mkfifo(fifo)
    try:
        one_clear_line(cli("kernels", str(fifo), cwd=tmp_path), "not a regular file")
        worker = ("worker", "--simulate", "--unsafe-no-isolation", "--token-file", str(fifo))
        one_clear_line(cli(*worker, cwd=tmp_path), "not a regular file")
    finally:
        fifo.unlink()  # no other test's project scan meets it


ORIGINAL = "__global__ void k(float* x) {\n    x[0] = 1.f;\n}\n"
REWRITTEN = "__global__ void k(float* x) {\n    x[0] = 2.f;\n    x[1] = 3.f;\n}\n"


def test_write_refuses_a_read_only_file_unless_forced(tmp_path: Path) -> None:
    cu = tmp_path / "k.cu"
    cu.write_text(ORIGINAL)
    cu.chmod(0o444)
    with pytest.raises(JobFailed, match="read-only"):
        write_rewrite(cu, ORIGINAL, REWRITTEN)
    assert cu.read_text() == ORIGINAL
    write_rewrite(cu, ORIGINAL, REWRITTEN, force=True)
    assert cu.read_text() == REWRITTEN and cu.stat().st_mode & 0o777 == 0o444


def test_optimize_write_refuses_a_read_only_file_before_running(saxpy: Path, tmp_path: Path) -> None:
    saxpy.chmod(0o444)
    one_clear_line(cli("optimize", str(saxpy), "--write", cwd=tmp_path), "read-only")


def test_write_keeps_hard_links(tmp_path: Path) -> None:
    cu, other = tmp_path / "k.cu", tmp_path / "also.cu"
    cu.write_text(ORIGINAL)
    os.link(cu, other)
    write_rewrite(cu, ORIGINAL, REWRITTEN)
    assert other.read_text() == REWRITTEN and os.path.samefile(cu, other)


def test_a_crlf_file_stays_crlf(tmp_path: Path) -> None:
    cu = tmp_path / "k.cu"
    cu.write_bytes(ORIGINAL.replace("\n", "\r\n").encode())
    original = cu.read_bytes().decode()
    write_rewrite(
        cu, original, REWRITTEN.replace("\n", "\r\n").replace("    x[1] = 3.f;\r\n", "    x[1] = 3.f;\n")
    )
    data = cu.read_bytes()
    assert data == REWRITTEN.replace("\n", "\r\n").encode()


@pytest.mark.parametrize("command", ["check", "kernels"])
def test_a_binary_file_is_one_line_exit_2(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.cli.main import main

    elf = tmp_path / "app.cu"
    elf.write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00\x03\x00>\x00\x01\x00\x1b[31m" * 40)
    assert main([command, str(elf)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and "a binary file, not CUDA source" in out.err


@pytest.mark.parametrize("command", ["check", "kernels"])
def test_a_text_file_that_is_not_cuda_fails_and_its_control_bytes_are_never_echoed(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.cli.main import main

    text = tmp_path / "notes.cu"
    text.write_text("hello \x1b[31mred\x1b[0m world \x07\n")
    assert main([command, str(text)]) == 1
    out = capsys.readouterr()
    assert "\x1b" not in out.out + out.err and "\x07" not in out.out + out.err
    assert "hello \\x1b[31mred" in out.out
    assert "no CUDA kernels and 1 syntax error(s)" in out.err


def test_a_python_file_given_to_check_exits_1(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nprint(torch.cuda.is_available())\n")
    out = cli("check", str(script), cwd=tmp_path)
    assert out.returncode == 1 and "is it CUDA source?" in out.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--arch", "sm_bogus"], "--arch: 'sm_bogus' is not an architecture such as sm_90"),
        (["--arch", "sm_35"], "cannot compile for sm_35 (it supports sm_"),
        (["-D", "1X=3"], "-D '1X=3': expected NAME or NAME=VALUE"),
        (["-D", "-Ifoo"], "-D '-Ifoo': expected NAME or NAME=VALUE"),
        (["-D", "X=a\x1bb"], "expected NAME or NAME=VALUE"),
    ],
)
def test_a_bad_arch_or_definition_is_one_line_on_stderr_exit_2_before_any_compile(
    args: list[str], needle: str, saxpy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.cli.main import main

    assert main(["check", str(saxpy), *args]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and needle in out.err, out


def test_definitions_that_nvcc_takes_are_taken(saxpy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from server.cli.main import main

    assert (
        main(["check", str(saxpy), "-D", "N", "-D", "TILE=32", "-D", "SQ(x)=((x)*(x))", "--arch", "sm_90a"])
        == 0
    )
