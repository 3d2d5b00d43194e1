"""``cuda-agent profile`` without a GPU: a recorded Nsight Compute CSV (tests/data/ncu) parsed into
the report's numbers, the agent's profile request, and the command's one-line failure when no
GPU (or no ncu) is there; on a GPU, a memory-bound bench kernel profiled for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from agent import profile as prof
from agent.proposal import Proposal
from agent.target import target_for
from cudasrc.source import Document
from sandbox.contract import CandidateResult, DeviceInfo, EvalRequest, EvalResult, Status
from sandbox.executor import Executor, ProgressFn
from sandbox.profile import parse_ncu_csv, report_lines

ROOT = Path(__file__).resolve().parents[1]
SAXPY = ROOT / "bench" / "kernels" / "saxpy.cu"
RECORDED = Path(__file__).parent / "data" / "ncu" / "saxpy_details.csv"


def test_the_recorded_csv_gives_sol_occupancy_limiter_stalls_and_bytes() -> None:
    p = parse_ncu_csv(RECORDED.read_text())
    assert p.available
    assert (p.memory_pct, p.compute_pct, p.dram_pct) == (88.41, 14.66, 88.41)
    assert (p.achieved_occupancy_pct, p.theoretical_occupancy_pct) == (83.27, 100.0)
    assert p.occupancy_limiter == "warps (block size)"  # 16 blocks per SM, the smallest limit
    assert p.dram_bytes == 402_735_104 and p.l2_bytes == 811_452_416
    assert p.duration_us == pytest.approx(121.952)
    assert [s.reason for s in p.stalls] == ["long_scoreboard", "lg_throttle", "wait", "drain"]
    lines = report_lines(p)
    assert lines[0] == "SOL memory 88% (DRAM 88%), compute 15% · 122 us"
    assert lines[1] == "occupancy 83% achieved of 100% theoretical, limited by warps (block size)"
    assert lines[2].startswith(
        "stalls (warps per issued instruction): long_scoreboard 21.64, lg_throttle 1.18"
    )
    assert lines[3] == "DRAM 403 MB · L2 811 MB (hit rate 50%)"


def test_the_limiter_is_the_smallest_block_limit() -> None:
    text = RECORDED.read_text().replace(
        '"launch__occupancy_limit_shared_mem","block","32"',
        '"launch__occupancy_limit_shared_mem","block","3"',
    )
    p = parse_ncu_csv(text)
    assert p.occupancy_limiter == "shared memory"
    assert "limited by shared memory" in report_lines(p)[1]


H200 = DeviceInfo("NVIDIA H200", "9.0", 132, 0, 0)


class ProfilingGpu(Executor):
    """Answers a profile request with the recorded metrics for every candidate; keeps the request."""

    def __init__(self) -> None:
        self.requests: list[EvalRequest] = []

    def evaluate(
        self,
        request: EvalRequest,
        *,
        progress: ProgressFn | None = None,
        cancel: threading.Event | None = None,
    ) -> EvalResult:
        self.requests.append(request)
        p = parse_ncu_csv(RECORDED.read_text())
        results = tuple(CandidateResult(c.id, Status.OK, profile=p) for c in request.candidates)
        return EvalResult(request.id, CandidateResult("baseline", Status.OK), results, H200)

    def device_info(self) -> DeviceInfo:
        return H200


def test_the_kernel_and_its_rewrite_are_each_verified_then_profiled() -> None:
    target = target_for(Document(SAXPY.read_text(), str(SAXPY)), "saxpy")
    code = target.definition.replace("int i =", "const int i =")
    gpu = ProfilingGpu()
    report = prof.profile(target, gpu, rewrite=Proposal(code=code, description="const index"))
    (request,) = gpu.requests
    assert request.options.profile and not request.options.time
    assert [c.id for c in request.candidates] == ["original", "rewrite"]
    assert (
        request.candidates[0].kernel == target.baseline
        and "const int i =" in request.candidates[1].kernel.source
    )
    assert report.available and [k.label for k in report.kernels] == ["original", "rewrite"]
    text = "\n".join(report.lines())
    assert text.startswith("saxpy at n=33554432 on NVIDIA H200") and "  rewrite: const index" in text
    assert text.count("SOL memory 88%") == 2


def test_a_kernel_that_did_not_verify_says_why_it_has_no_profile() -> None:
    k = prof.profiled("rewrite", "", CandidateResult("rewrite", Status.MISMATCH, "y[3] differs"))
    assert not k.profile.available and k.profile.message == "not profiled: mismatch: y[3] differs"
    assert (k.status, k.message) == (Status.MISMATCH, "y[3] differs")
    ok = prof.profiled("original", "", CandidateResult("original", Status.OK))
    assert ok.profile.message == "this executor does not profile"


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_AGENT_")}
    return subprocess.run(
        [sys.executable, "-m", "server", "profile", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, **env},
    )


def test_without_a_gpu_the_command_says_so_in_one_line() -> None:
    out = cli(str(SAXPY), "-k", "saxpy", CUDA_VISIBLE_DEVICES="")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("cuda-agent: error: ") and "GPU" in line


def test_where_nsight_compute_is_missing_the_json_says_why_and_the_exit_status_is_1(tmp_path: Path) -> None:
    out = cli(str(SAXPY), "--json", CUDA_AGENT_TEST_EXECUTOR="1", XDG_DATA_HOME=str(tmp_path))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    data = json.loads(out.stdout)
    assert data["kernel"] == "saxpy" and data["problem"] == "n=33554432"
    (k,) = data["kernels"]
    assert k["label"] == "original" and k["status"] == "ok"
    assert k["profile"]["available"] is False and "no Nsight Compute" in k["profile"]["message"]
    assert (
        out.stderr.strip()
        == "cuda-agent: error: no Nsight Compute metrics for saxpy: the simulated GPU has no Nsight Compute"
    )


def test_a_rewrite_with_another_parameter_list_is_a_user_error(tmp_path: Path) -> None:
    other = tmp_path / "other.cu"
    other.write_text("__global__ void saxpy2(float a, float* y, int n) { }\n")
    out = cli(
        str(SAXPY), "--with", f"{other}:saxpy2", CUDA_AGENT_TEST_EXECUTOR="1", XDG_DATA_HOME=str(tmp_path)
    )
    assert out.returncode == 2 and "cannot replace saxpy" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.gpu
def test_a_memory_bound_kernel_profiles_as_memory_bound() -> None:
    """saxpy at n=2^25 reads x and y and writes y: 12 bytes per element from DRAM."""
    from sandbox.profile import find_ncu

    if find_ncu() is None:
        pytest.skip("no ncu on this machine")
    out = cli(str(SAXPY), "--json")
    assert out.returncode == 0, out.stderr
    (k,) = json.loads(out.stdout)["kernels"]
    p = k["profile"]
    assert p["available"], p["message"]
    assert p["memory_pct"] > 50 > p["compute_pct"]
    assert 0.7 < p["dram_bytes"] / (12 * (1 << 25)) < 1.3  # ncu flushes the caches before each pass
    assert p["occupancy_limiter"] and p["stalls"][0]["per_issue"] > 0


def test_the_report_of_a_replaced_profile_is_its_lines() -> None:
    p = replace(parse_ncu_csv(RECORDED.read_text()), theoretical_occupancy_pct=0.0, occupancy_limiter="")
    assert report_lines(p)[1] == "occupancy 83% achieved"


def test_the_docs_show_what_the_command_prints_for_the_recorded_profile() -> None:
    readme = (ROOT / "docs" / "guide" / "profile.md").read_text(encoding="utf-8")
    shown = readme.split("$ cuda-agent profile bench/kernels/saxpy.cu\n", 1)[1].split("```", 1)[0]
    target = target_for(Document(SAXPY.read_text(), str(SAXPY)), "saxpy")
    report = prof.profile(target, ProfilingGpu())
    assert shown.splitlines() == report.lines()


def test_the_hover_lists_each_kernels_metrics_and_says_when_the_kernel_changed_since() -> None:
    from agent.records import ProfiledKernel, ProfileRecord
    from server.texts import profile_details as details

    p = parse_ncu_csv(RECORDED.read_text())
    kernels = (
        ProfiledKernel("original", "saxpy", p),
        ProfiledKernel("rewrite", "block 256", replace(p, memory_pct=91.0)),
    )
    rec = ProfileRecord("r", "n=33554432", "NVIDIA H200", "2026-12-04 13:00 UTC", kernels, kernel_hash="h1")
    text = details(rec, "h1")
    assert text.startswith("**Last profile** (Nsight Compute, one launch at n=33554432)\n- original\n")
    assert "- rewrite: block 256\n  - SOL memory 91%" in text
    assert text.count("limited by warps") == 2 and "long\\_scoreboard 21\\.64" in text
    assert details(rec, "h2").startswith("**Last profile** (edited since)")
