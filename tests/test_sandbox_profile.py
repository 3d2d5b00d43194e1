"""The Nsight Compute profile path (sandbox/profile.py) without a GPU: ncu's CSV parsed, ncu
missing reported as such, and the command run as a real subprocess (a stand-in ``ncu`` on PATH
that records its arguments and writes a CSV, as ncu does with ``--log-file``)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from sandbox import profile as prof
from sandbox.contract import ArgSpec, Launch, Problem

HEADER = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'


def row(name: str, unit: str, value: str) -> str:
    return f'"0","123","python3","127.0.0.1","vadd","1","7","(256, 1, 1)","(64, 1, 1)","0","9.0","Command line profiler metrics","{name}","{unit}","{value}"'


CSV = "\n".join(
    [
        "==PROF== Connected to process 123 (/usr/bin/python3.12)",
        '==PROF== Profiling "vadd" - 0: 0%....50%....100% - 9 passes',
        HEADER,
        row("dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "81.52"),
        row("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "%", "83.10"),
        row("gpu__time_duration.sum", "nsecond", "12,480"),
        row("lts__t_sector_hit_rate.pct", "%", "33.30"),
        row("sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "12.04"),
        row("sm__warps_active.avg.pct_of_peak_sustained_active", "%", "71.9"),
        row("smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio", "ratio", "9.75"),
        row("smsp__average_warps_issue_stalled_selected_per_issue_active.ratio", "ratio", "1"),
        row("smsp__average_warps_issue_stalled_wait_per_issue_active.ratio", "ratio", "0.81"),
        row("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio", "ratio", "0"),
        row("smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio", "ratio", "2.5"),
        row("smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio", "ratio", "0.02"),
        row("smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio", "ratio", "0.3"),
        "==PROF== Disconnected from process 123",
    ]
)


def test_the_csv_becomes_a_profile_with_the_top_stalls_first() -> None:
    p = prof.parse_ncu_csv(CSV)
    assert p.available and p.message == ""
    assert (p.memory_pct, p.dram_pct, p.compute_pct) == (83.10, 81.52, 12.04)
    assert p.achieved_occupancy_pct == 71.9 and p.l2_hit_pct == 33.30
    assert p.duration_us == pytest.approx(12.48)  # 12,480 ns
    assert [s.reason for s in p.stalls] == ["long_scoreboard", "lg_throttle", "wait", "short_scoreboard"]
    text = prof.profile_text(p)
    assert "memory throughput 83% of peak" in text and "long_scoreboard 9.75" in text
    assert "achieved occupancy 72%" in text and "L2 hit rate 33%" in text


def test_output_without_metrics_is_not_a_profile() -> None:
    p = prof.parse_ncu_csv("==PROF== Connected to process 1\n==ERROR== the kernel was not launched\n")
    assert not p.available and "no metrics" in p.message


def job() -> prof.RunnerJob:
    n = 1000
    problem = Problem(
        "n=1000",
        {"n": n},
        (
            ArgSpec("a", "in", "float32", n),
            ArgSpec("c", "out", "float32", n),
            ArgSpec("n", "scalar", "int32", value=n),
        ),
        Launch((4, 1, 1), (256, 1, 1)),
    )
    return prof.RunnerJob(b"cubin", "_Z4vaddPKfPfi", problem, problem.launch, 7, 0, "cupy")


def no_ncu(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    monkeypatch.setenv("PATH", path)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(prof, "NCU_CANDIDATES", ())


def test_without_ncu_the_profile_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    no_ncu(monkeypatch, str(tmp_path))
    p = prof.profile_candidate(job(), [], dict(os.environ), str(tmp_path), 10)
    assert not p.available and "ncu) is not installed on the GPU machine" in p.message
    assert "not available: Nsight Compute (ncu) is not installed" in prof.profile_text(p)


def fake_ncu(tmp_path: Path, csv_text: str, code: int = 0) -> Path:
    """An `ncu` that records its arguments and writes `csv_text` to its --log-file."""
    (tmp_path / "out.csv").write_text(csv_text)
    exe = tmp_path / "bin" / "ncu"
    exe.parent.mkdir()
    exe.write_text(
        f"#!{sys.executable}\n"
        "import sys, shutil\n"
        f"open({str(tmp_path / 'args')!r}, 'w').write('\\n'.join(sys.argv[1:]))\n"
        "log = sys.argv[sys.argv.index('--log-file') + 1]\n"
        f"shutil.copy({str(tmp_path / 'out.csv')!r}, log)\n"
        f"sys.exit({code})\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def test_ncu_runs_the_standalone_runner_with_clocks_left_alone(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    exe = fake_ncu(tmp_path, CSV)
    no_ncu(monkeypatch, f"{exe.parent}{os.pathsep}/usr/bin:/bin")
    p = prof.profile_candidate(job(), [], dict(os.environ), str(tmp_path), 30)
    assert p.available and p.memory_pct == 83.10
    args = (tmp_path / "args").read_text().splitlines()
    assert args[args.index("--clock-control") + 1] == "none" and "--csv" in args
    assert args[args.index("--kernel-name") + 1] == "_Z4vaddPKfPfi"
    assert args[args.index("--launch-count") + 1] == "1"
    metrics = args[args.index("--metrics") + 1]
    assert "sm__warps_active.avg.pct_of_peak_sustained_active" in metrics and "regex:smsp__" in metrics
    assert args[-3:-1] == ["-m", "sandbox.profile"] and args[-4] == sys.executable


def test_a_failing_ncu_run_is_reported_with_its_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    exe = fake_ncu(tmp_path, "==ERROR== ERR_NVGPUCTRPERM - no permission to access the counters\n", code=1)
    no_ncu(monkeypatch, f"{exe.parent}{os.pathsep}/usr/bin:/bin")
    p = prof.profile_candidate(job(), [], dict(os.environ), str(tmp_path), 30)
    assert not p.available and "ERR_NVGPUCTRPERM" in p.message
