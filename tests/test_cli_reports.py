"""Every ``--json`` report is a typed dataclass (``server/cli/reports.py``) through the contract's
converter: what a command prints reads back into its report type and prints the same again.

CPU-only: the simulated GPU (``CUDA_AGENT_TEST_EXECUTOR=1``) runs the GPU commands."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.profile import ProfileReport
from sandbox.compiler import CompilerUnavailable
from sandbox.contract import ContractError, from_dict, to_dict
from sandbox.runtime import MemoryCapExceeded
from server.cli import reports
from server.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
VADD = ROOT / "bench" / "kernels" / "vadd_poor_block.cu"
COMPARE = ROOT / "tests" / "data" / "compare"


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUDA_AGENT_TEST_EXECUTOR", "1")
    shutil.copy(VADD, tmp_path / "vadd.cu")
    shutil.copy(COMPARE / "vadd_pair.cu", tmp_path / "vadd_pair.cu")
    return tmp_path


def printed(capsys: pytest.CaptureFixture[str], *args: str) -> Any:
    rc = main([*args, "--json"])
    out = capsys.readouterr()
    assert rc in (0, 1), out.err
    return json.loads(out.out)


def reprinted(report: object) -> Any:
    """``report`` as the command prints it (JSON has no tuples)."""
    return json.loads(json.dumps(to_dict(report)))


@pytest.mark.parametrize(
    ("args", "report"),
    [
        (("kernels", "{dir}/vadd.cu"), reports.KernelsReport),
        (("bench", "{dir}/vadd.cu"), reports.BenchReport),
        (("optimize", "{dir}/vadd.cu", "--budget", "3c", "--trajectory", "off"), reports.OptimizeReport),
        (("compare", "{dir}/vadd_pair.cu", "-k", "vadd", "-w", "vadd_x4"), reports.CompareReport),
        (("profile", "{dir}/vadd.cu"), ProfileReport),
        (("suite", "{dir}", "--match", "vadd.cu", "--budget", "2c"), reports.SuiteReport),
    ],
)
def test_a_report_reads_back_into_its_type_and_prints_the_same(
    work: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...], report: type
) -> None:
    data = printed(capsys, *(a.format(dir=work) for a in args))
    typed = from_dict(report, data)
    assert isinstance(typed, report)
    assert reprinted(typed) == data


def test_a_field_of_the_wrong_type_is_refused(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = printed(capsys, "bench", str(work / "vadd.cu"))
    assert data["simulated"] is True and data["result"]["status"] == "ok"
    with pytest.raises(ContractError, match="result"):
        from_dict(reports.BenchReport, {**data, "result": "fast"})


def test_check_reports_ok_beside_every_kernel(capsys: pytest.CaptureFixture[str]) -> None:
    data = printed(capsys, "check", str(ROOT / "tests" / "data" / "vector_ops.cu"))
    typed = from_dict(reports.CheckReport, data)
    assert typed.ok == all(k.ok and not k.spec_errors for k in typed.kernels)
    assert reprinted(typed) == data


def test_a_capture_report_round_trips() -> None:
    report = reports.CaptureReport(
        program=("./app", "--n", "4"),
        exit_status=0,
        seconds=1.5,
        kernels={"void scale<float>(float*, int)": 2},
        launch=reports.CapturedLaunch(
            1, "cudaLaunchKernel", "void scale<float>(float*, int)", (4, 1, 1), (256, 1, 1), 0
        ),
        file="/src/scale.cu",
        kernel="scale",
        spec="// @cuda-agent sizes n=1024",
        notes=("n from the grid",),
        errors=(),
        saved_inputs={"x": "/tmp/in/x.bin"},
        diff="--- a\n+++ b\n",
        written=None,
        backup=None,
    )
    data = reprinted(report)
    assert data["launch"]["grid"] == [4, 1, 1] and data["written"] is None
    assert from_dict(reports.CaptureReport, data) == report


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (CompilerUnavailable("no NVRTC here"), 1),  # Unavailable
        (ContractError("a field is wrong"), 2),  # InputError
        (MemoryCapExceeded("asked for 9 GiB"), 1),  # Failed
    ],
)
def test_the_exit_status_is_the_branch_of_the_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: Exception, status: int
) -> None:
    def fails(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr("agent.check.check_document", fails)
    assert main(["check", str(ROOT / "tests" / "data" / "vector_ops.cu")]) == status == type(error).exit_code
    err = capsys.readouterr().err
    assert err == f"cuda-agent: error: {error}\n"
