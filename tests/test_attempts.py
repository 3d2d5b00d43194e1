"""Every candidate's verdict in a run's result (agent.attempts.AttemptRecord), where errors are
reported (the file's own line:col), and the CLI's summary, ``--attempts`` table and ``--json``;
on the simulated GPU (compiles with NVRTC, no GPU needed)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from loop_fakes import SAXPY, MarkerExecutor, saxpy_target, variant

from agent.attempts import AttemptRecord, verdict_summary
from agent.loop import LoopSettings, optimize
from agent.proposal import Attempt, Proposal
from agent.proposer import OptimizeBudget, OptimizeContext, Proposer
from sandbox.testing import FakeExecutor
from server.cli.main import main
from server.cli.render import attempts_table

T = saxpy_target()
HELPER = "__device__ float twice(float v) {\n    return 2.0f * v;\n}\n\n"


class Fixed(Proposer):
    """Proposes ``proposals`` once."""

    def __init__(self, proposals: Sequence[Proposal]) -> None:
        self.proposals = list(proposals)

    def propose(self, context: OptimizeContext, history: Sequence[Attempt], n: int) -> list[Proposal]:
        out, self.proposals = self.proposals, []
        return out


@pytest.fixture
def cu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CUDA_AGENT_TEST_EXECUTOR", "1")
    return Path(shutil.copy(SAXPY, tmp_path / "saxpy.cu"))


def test_each_verdict_is_recorded_and_a_candidates_compile_error_is_at_its_file_line() -> None:
    broken = HELPER + T.definition.replace("int i =", "int i = undefined_thing +")
    ok = T.definition.replace("y[i] = alpha * x[i] + y[i];", "y[i] = y[i] + alpha * x[i];")
    res = optimize(
        T,
        Fixed([Proposal(broken, "broken"), Proposal(ok, "reordered"), Proposal(ok, "again")]),
        FakeExecutor(),
        budget=OptimizeBudget(wall_s=60),
    )
    bad, good, dup = res.records
    candidate_file = T.file_with(broken).splitlines()
    line = next(i for i, text in enumerate(candidate_file) if "undefined_thing" in text) + 1
    assert (bad.status, bad.compile_line) == ("compile_error", line)
    assert bad.compile_column == candidate_file[line - 1].index("undefined_thing") + 1
    assert line != T.text.count("\n", 0, T.definition_start) + 2  # the helper shifted it
    assert (
        bad.message.startswith(f"{T.path}:{line}:{bad.compile_column}: ") and "undefined_thing" in bad.message
    )
    assert "error" in bad.compile_log and bad.reward == -1.0
    assert (good.status, good.speedup, good.registers, good.problem) == ("ok", 2.0, 32, "n=1000")
    assert good.median_ms == pytest.approx(0.5) and good.reward is not None and good.reward > 2
    assert dup.duplicate_of == good.candidate_id and dup.status == "ok"
    assert [r.index for r in res.records] == [0, 1, 2] and res.simulated
    assert verdict_summary(res.records) == "3 candidates: 2 ok, 1 compile_error"


def test_the_table_says_what_went_wrong_with_each_candidate() -> None:
    res = optimize(
        T,
        Fixed(
            [
                Proposal(variant(T, "mismatch"), "wrong tail"),
                Proposal(variant(T, "speedup=1.5"), "faster"),
                Proposal(variant(T, "mismatch"), "wrong tail again"),
            ]
        ),
        MarkerExecutor(),
        budget=OptimizeBudget(wall_s=60),
        settings=LoopSettings(sanitize_winner=False),
    )
    wrong, fast, again = res.records
    assert (wrong.status, wrong.problem, wrong.output, wrong.first_bad_index) == (
        "mismatch",
        "n=4097",
        "y",
        4096,
    )
    assert again.duplicate_of == wrong.candidate_id and fast.registers == 16
    rows = attempts_table(res.records).splitlines()
    assert rows[0].split() == ["#", "candidate", "status", "speedup", "regs", "verdict"]
    assert rows[1].split()[:3] == ["0", "b0-c0", "mismatch"]
    assert rows[1].endswith("y[4096] at n=4097: outputs differ at n=4097")
    assert rows[2].split()[2:5] == ["ok", "1.50x", "16"] and rows[2].endswith("faster")
    assert "same as b0-c0: y[4096] at n=4097" in rows[3]
    assert verdict_summary(res.records) == "3 candidates: 2 mismatch, 1 ok"


def test_cli_prints_a_verdict_summary_and_the_attempts_table(
    cu: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["optimize", str(cu), "--budget", "3c", "--trajectory", "off", "--attempts"]) == 0
    out = capsys.readouterr().out
    assert "on the simulated GPU, not measured" in out
    assert "  3 candidates: 3 ok in " in out
    rows = out[out.index("  #  candidate") :].splitlines()
    assert len(rows) == 4 and rows[1].split()[:4] == ["0", "b0-c0", "ok", "2.00x"]


def test_cli_json_lists_every_attempt_and_says_simulated(
    cu: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["optimize", str(cu), "--budget", "2c", "--trajectory", "off", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    record = out["record"]  # the record the editor stores, as the CLI prints it
    assert record["simulated"] is True and record["attempts"] == 2 and out["verdicts"] == "2 candidates: 2 ok"
    assert [a["candidate_id"] for a in record["history"]] == ["b0-c0", "b1-c0"]
    assert set(record["history"][0]) == {f.name for f in dataclasses.fields(AttemptRecord)}


def test_a_compile_error_in_the_original_is_reported_at_its_file_line(
    cu: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = cu.read_text().replace("y[i] = alpha * x[i] + y[i];", "y[i] = alpha * x[i] + yy[i];")
    cu.write_text(text)
    line = next(i for i, t in enumerate(text.splitlines()) if "yy[i]" in t) + 1
    column = text.splitlines()[line - 1].index("yy[i]") + 1
    assert main(["optimize", str(cu), "--trajectory", "off"]) == 1
    out = capsys.readouterr()
    assert f'{cu}:{line}:{column}: identifier "yy" is undefined' in out.out
    assert main(["bench", str(cu)]) == 1
    assert f'{cu}:{line}:{column}: identifier "yy" is undefined' in capsys.readouterr().out


SPEC_TYPO = """\
// @cuda-agent sizes n=1000
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n]
// @cuda-agent arg yy out float[n]
__global__ void copy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
"""


def test_an_arg_line_naming_no_parameter_is_reported_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cu = tmp_path / "copy.cu"
    cu.write_text(SPEC_TYPO)
    assert main(["optimize", str(cu), "--trajectory", "off"]) == 2
    err = capsys.readouterr().err
    assert f"{cu}:4: spec error: arg: copy has no parameter `yy`" in err and "did you mean `y`?" in err
    assert "has no `arg` line" not in err
    assert main(["check", str(cu)]) == 1
    out = capsys.readouterr()
    assert f"{cu}:4: error: spec of copy: arg: copy has no parameter `yy`" in out.out
    assert "1 spec(s) have errors" in out.err


def test_a_file_without_kernels_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    py = tmp_path / "script.py"
    py.write_text("print('hello')\n")
    assert main(["optimize", str(py)]) == 2
    err = capsys.readouterr().err
    assert "no CUDA kernel (`__global__` function) found" in err and "--kernel" not in err


def test_a_negative_gpu_index_is_refused(cu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", str(cu), "--gpu", "-1"]) == 2
    assert "Invalid value for '--gpu'" in capsys.readouterr().err


def test_write_refuses_a_read_only_file_unless_forced(cu: Path, capsys: pytest.CaptureFixture[str]) -> None:
    original = cu.read_text()
    cu.chmod(0o444)
    assert main(["optimize", str(cu), "--budget", "1c", "--trajectory", "off", "--write"]) == 2
    assert "is read-only (mode 444)" in capsys.readouterr().err and cu.read_text() == original
    assert not list(cu.parent.glob("*.bak*"))
    assert main(["optimize", str(cu), "--budget", "1c", "--trajectory", "off", "--write", "--force"]) == 0
    assert cu.read_text() != original and os.stat(cu).st_mode & 0o777 == 0o444
