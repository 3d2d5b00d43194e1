"""The command line's contract: subcommands listed, user mistakes are one line and non-zero."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from server.cli.main import main

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
    # the cause, then both ways forward: a GPU (here: CuPy from the clone; or a worker), the simulated GPU
    assert any(c in line for c in ("is not installed", "no NVIDIA driver", "driver is older", "finds no GPU"))
    # the package is on no index: the hint installs the extra from the clone, never `cuda-agent[gpu]`
    assert "pip install -e '.[gpu]' in your clone" in line and "cuda-agent[gpu]" not in line
    assert "--simulate" in line


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


HOSTILE = (
    ("one_arg_min", 12, "min takes 2 to 16 arguments"),
    ("infinite_cdiv", 16, "`cdiv(1e999, 2)` cannot be evaluated"),
    ("subnormal_cdiv", 20, "`cdiv(1, 1e-320)` cannot be evaluated"),
    ("huge_integer", 24, "more than 2^62"),
    ("bad_tolerance", 29, "atol=1e999 must be a finite number >= 0"),
    ("grid_too_big", 34, "grid (2147483648, 1, 1) is beyond the device's limits"),
    ("smem_too_big", 44, "must be 0..232448 bytes"),
)


@pytest.mark.parametrize("command", ["bench", "optimize"])
@pytest.mark.parametrize(("kernel", "line", "needle"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_spec_is_one_line_exit_2(
    command: str,
    kernel: str,
    line: int,
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CUDA_AGENT_TEST_EXECUTOR", "1")
    path = str(Path(__file__).parent / "data" / "hostile_specs.cu")
    rc = main([command, path, "--kernel", kernel])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0].startswith(f"cuda-agent: error: {path}:{line}: spec error: ") and needle in err[0]


def test_kernels_lists_every_kernel_of_a_file_with_hostile_specs(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["kernels", str(Path(__file__).parent / "data" / "hostile_specs.cu")])
    out = capsys.readouterr()
    assert rc == 0 and "Traceback" not in out.err
    for kernel, line, needle in HOSTILE:
        assert f"{kernel}(" in out.out and f"spec error, line {line}: " in out.out and needle in out.out
    assert "good_first(" in out.out and "good_last(" in out.out


def test_check_prints_each_kernel_as_soon_as_it_is_compiled(tmp_path, monkeypatch, capsys) -> None:
    import agent.check

    source = "".join(f"__global__ void k{i}(float* y) {{ y[threadIdx.x] = {i}.0f; }}\n" for i in range(3))
    (tmp_path / "three.cu").write_text(source)
    real, seen = agent.check.check_kernel, []

    def compile_one(doc, kernel, **kw):  # before each compile: the kernels before it are on stdout
        seen.append([line.split()[1].rstrip(":") for line in capsys.readouterr().out.splitlines()])
        return real(doc, kernel, **kw)

    monkeypatch.setattr(agent.check, "check_kernel", compile_one)
    assert main(["check", str(tmp_path / "three.cu")]) == 0
    assert seen == [[], ["k0"], ["k1"]] and capsys.readouterr().out.startswith("ok   k2:")


def test_bare_cuda_agent_lists_the_commands(capsys) -> None:
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Usage: cuda-agent") and "Commands:" in out
    for name in ("bench", "capture", "check", "compare", "kernels", "optimize", "profile", "reward", "serve"):
        assert f"\n  {name} " in out


def test_capture_help_keeps_its_usage_line_apart(capsys) -> None:
    assert main(["capture", "--help"]) == 0
    assert "\n  cuda-agent capture [OPTIONS] -- PROGRAM [ARGS]...\n\n" in capsys.readouterr().out


def test_suite_on_a_folder_without_specs_names_the_files_plainly(tmp_path, capsys) -> None:
    assert main(["suite", str(tmp_path)]) == 2
    assert (
        capsys.readouterr()
        .err.strip()
        .endswith("no kernel with a `// @cuda-agent` spec in its .cu/.cuh files")
    )
