"""`cuda-agent suite DIR` on the simulated GPU (``CUDA_AGENT_TEST_EXECUTOR=1``), and the summary's
arithmetic (fast_1, fast_1.5, geomean)."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.suite import SuiteEntry, ceiling, families, pct_of, summarize
from sandbox.contract import CandidateResult

KERNELS = Path(__file__).parent.parent / "bench" / "kernels"
DATA = Path(__file__).parent / "data"


def run_cli(*args: str, delay_s: float = 0.0) -> subprocess.CompletedProcess[str]:
    env = {
        "CUDA_AGENT_TEST_EXECUTOR": "1",
        "CUDA_AGENT_TEST_EXECUTOR_DELAY": str(delay_s),
        "PATH": "/usr/bin:/bin",
    }
    return subprocess.run(
        [sys.executable, "-m", "server", *args], capture_output=True, text=True, timeout=120, env=env
    )


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    for name in ("vadd_poor_block.cu", "block_sum.cu", "transpose.cu"):
        shutil.copy(KERNELS / name, tmp_path / name)
    shutil.copy(DATA / "spec_errors.cu", tmp_path / "spec_errors.cu")  # kernels whose specs do not resolve
    (tmp_path / "notes.txt").write_text("not CUDA\n")
    (tmp_path / "nospec.cu").write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    return tmp_path


@pytest.mark.slow
def test_suite_table_and_summary(folder: Path) -> None:
    out = run_cli("suite", str(folder), "--budget", "12c")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "simulated GPU" in lines[0] and "12c per kernel" in lines[0]
    assert lines[1].split()[:3] == ["kernel", "status", "speedup"]
    rows = {line.split()[0]: line for line in lines[2:] if line and not line.startswith(("fast_1", " "))}
    for kernel in ("vadd_poor_block:vadd", "block_sum", "transpose"):
        assert "improved" in rows[kernel] and "2.00x [1.96-2.04]" in rows[kernel]
    summary = next(line for line in lines if line.startswith("fast_1"))
    errors = sum("error" in line for line in rows.values())
    ran = 3
    assert f"fast_1 {ran / (ran + errors):.0%}" in summary
    assert "geomean 2.00x" in summary
    assert f"{errors} not run" in summary and errors >= 1
    assert "nospec" not in out.stdout  # kernels without a spec are not part of the suite


@pytest.mark.slow
def test_suite_json(folder: Path) -> None:
    out = run_cli("suite", str(folder), "--budget", "6c", "--json", "--seed", "3")
    only = run_cli("suite", str(folder), "--budget", "2c", "--json", "--match", "b*")
    assert [k["kernel"] for k in json.loads(only.stdout)["kernels"]] == ["block_sum"]
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["device"] == "simulated GPU" and data["simulated"] is True and data["seed"] == 3
    kernels = {k["kernel"]: k for k in data["kernels"]}
    vadd = kernels["vadd"]
    assert vadd["status"] == "improved" and vadd["attempts"] == 6
    assert vadd["pct_peak_after"] == pytest.approx(2 * vadd["pct_peak_before"], rel=1e-6)
    assert vadd["speedup_low"] < vadd["speedup"] < vadd["speedup_high"]
    assert any(k["status"] == "error" and k["description"] for k in data["kernels"])
    s = data["summary"]
    assert s["kernels"] == len(data["kernels"]) and s["improved"] == 3
    assert s["fast_1"] == pytest.approx(3 / s["kernels"]) and s["geomean"] == pytest.approx(2.0)


@pytest.mark.slow
def test_suite_reports_each_kernel_as_it_finishes(folder: Path, tmp_path: Path) -> None:
    log = tmp_path / "out" / "suite.jsonl"
    log.parent.mkdir()
    log.write_text('{"earlier": "run"}\n')  # appended to, never truncated
    out = run_cli("suite", str(folder), "--budget", "3c", "--json", "--jsonl", str(log))
    assert out.returncode == 0, out.stderr
    final = json.loads(out.stdout)["kernels"]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert lines[0] == {"earlier": "run"} and lines[1:] == final
    progress = [line for line in out.stderr.splitlines() if line.startswith("[")]
    assert len(progress) == len(final)
    assert progress[0].startswith(f"[1/{len(final)}] ") and f"[{len(final)}/{len(final)}]" in progress[-1]
    assert any("vadd: improved 2.00x [1.96-2.04] in " in line for line in progress)


def test_suite_deadline_covers_the_whole_kernel(folder: Path) -> None:
    only = folder / "only"
    only.mkdir()
    shutil.copy(folder / "transpose.cu", only / "transpose.cu")
    started = time.monotonic()
    # 0.5 s per candidate and 100 candidates to try: only the 2 s deadline ends it
    out = run_cli("suite", str(only), "--budget", "100c", "--deadline", "2", "--json", delay_s=0.5)
    assert out.returncode == 0, out.stderr
    (kernel,) = json.loads(out.stdout)["kernels"]
    assert "stopped at its 2 s deadline" in kernel["description"] and kernel["attempts"] < 10
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(
    "args, needle",
    [
        (("suite", "/no/such/dir"), "no such directory"),
        (("suite", str(DATA / "sandbox"), "--budget", "soon"), "--budget soon"),
        (("suite", str(DATA / "adversarial")), "no kernel with a `// @cuda-agent` spec"),
        (("suite", str(KERNELS), "--match", "nothing*"), "no kernel with a `// @cuda-agent` spec"),
    ],
)
def test_suite_user_mistakes(args: tuple[str, ...], needle: str) -> None:
    out = run_cli(*args)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and needle in out.stderr


def entry(status: str, speedup: float = 1.0) -> SuiteEntry:
    return SuiteEntry("f.cu", "k", status, speedup=speedup, speedup_low=speedup, speedup_high=speedup)


def test_summary_arithmetic() -> None:
    s = summarize(
        (
            entry("improved", 4.0),
            entry("improved", 1.2),
            entry("not_improved", 1.0),
            entry("baseline_failed"),
            entry("error"),
        )
    )
    assert s.kernels == 5 and s.improved == 2 and s.errors == 2
    assert s.fast_1 == pytest.approx(2 / 5) and s.fast_1_5 == pytest.approx(1 / 5)
    assert s.geomean == pytest.approx(math.exp((math.log(4.0) + math.log(1.2)) / 3))
    assert summarize(()).geomean == 0.0


def test_each_kernel_is_measured_against_the_ceiling_it_is_nearer() -> None:
    memory = CandidateResult("a", "ok", pct_peak_bandwidth=40.0, pct_peak_flops=3.0)
    compute = CandidateResult("b", "ok", pct_peak_bandwidth=2.0, pct_peak_flops=11.0)
    undeclared = CandidateResult("c", "ok", pct_peak_bandwidth=5.0)  # no flops in the spec
    assert [ceiling(r) for r in (memory, compute, undeclared)] == ["copy", "fp32", "copy"]
    assert (pct_of(memory, "copy"), pct_of(compute, "fp32"), pct_of(compute, "copy")) == (40.0, 11.0, 2.0)


def test_families_are_the_folders_under_the_suite_directory(tmp_path: Path) -> None:
    def at(file: str, status: str, speedup: float, roof: str, before: float, after: float) -> SuiteEntry:
        return SuiteEntry(
            str(tmp_path / file),
            "k",
            status,
            speedup=speedup,
            ceiling=roof,
            pct_peak_before=before,
            pct_peak_after=after,
        )

    entries = (
        at("a.cu", "improved", 4.0, "copy", 10.0, 40.0),
        at("variants/rows/x.cu", "improved", 2.0, "copy", 20.0, 40.0),
        at("variants/rows/y.cu", "not_improved", 1.0, "copy", 30.0, 30.0),
        at("variants/rows/z.cu", "error", 0.0, "", 0.0, 0.0),
        at("variants/dot/m.cu", "improved", 9.0, "fp32", 2.0, 18.0),
        at("b.cu", "improved", 1.0 + 1e-9, "fp32", 50.0, 50.0),
    )
    groups = {g.family: g for g in families(entries, tmp_path)}
    assert list(groups) == [".", "variants/dot", "variants/rows"]
    rows = groups["variants/rows"]
    assert (rows.summary.kernels, rows.summary.errors, rows.ceilings) == (3, 1, ("copy",))
    assert rows.summary.geomean == pytest.approx(math.sqrt(2.0)) and rows.summary.fast_1_5 == pytest.approx(
        1 / 3
    )
    assert (rows.pct_peak_before, rows.pct_peak_after) == (
        pytest.approx(25.0),
        pytest.approx(35.0),
    )  # ran only
    top = groups["."]
    assert top.ceilings == ("copy", "fp32") and top.pct_peak_after == pytest.approx(45.0)
    assert groups["variants/dot"].summary.geomean == pytest.approx(9.0)


@pytest.mark.slow
def test_suite_runs_a_subfolder_and_gives_each_family(folder: Path) -> None:
    nested = folder / "variants" / "rows"
    nested.mkdir(parents=True)
    shutil.copy(KERNELS / "variants" / "rows" / "row_max_while.cu", nested / "row_max_while.cu")
    only = json.loads(
        run_cli("suite", str(folder), "--budget", "2c", "--json", "--match", "variants/*/*").stdout
    )
    assert [(k["kernel"], k["ceiling"]) for k in only["kernels"]] == [("row_max", "copy")]
    assert [f["family"] for f in only["families"]] == ["variants/rows"]
    every = run_cli("suite", str(folder), "--budget", "2c", "--match", "**/*")
    assert every.returncode == 0, every.stderr
    family_lines = [line.split()[0] for line in every.stdout.splitlines() if "% of copy" in line]
    assert family_lines == [".", "variants/rows"]


@pytest.mark.slow
def test_suite_deadline_reaches_compute_sanitizer(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-kernel deadline covers compute-sanitizer on the winner: a sanitizer run that would
    take minutes is stopped with the kernel (real worker processes, a scripted GPU whose every
    candidate is 2x faster, a stand-in compute-sanitizer that hangs)."""
    from sandbox_fakes import HANGING_SANITIZER, fake_sanitizer

    from agent.proposer import OptimizeBudget
    from agent.suite import run_suite
    from sandbox.local import LocalExecutor

    monkeypatch.setenv(
        "PATH", f"{fake_sanitizer(tmp_path, HANGING_SANITIZER)}{os.pathsep}{os.environ['PATH']}"
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    only = folder / "only"
    only.mkdir()
    shutil.copy(folder / "transpose.cu", only / "transpose.cu")
    with LocalExecutor(handler="sandbox_fakes:FasterHandler", sandbox=False, compile_workers=2) as ex:
        ex.device_info()  # as the CLI does before the first kernel
        started = time.monotonic()
        (e,) = run_suite(only, ex, budget=OptimizeBudget(wall_s=None, candidates=2), deadline_s=4.0)
    assert time.monotonic() - started < 20
    assert e.status == "improved" and "stopped at its 4 s deadline" in e.description
