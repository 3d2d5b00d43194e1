"""``cuda-agent speedup`` (agent/program.py) on a simulated GPU: ranking, the patch across files,
rebuild, output comparison with tolerance, refusal and byte-for-byte revert when outputs differ,
and the rule that a program whose outputs change is never reported faster.

The program is the multi-file fixture (tests/data/capture/multi: kernels in a header, launches in
another translation unit) with its capture records and kernel times in
tests/data/program/multi_sim.json; a Python stand-in (tests/data/program/run.py) prints and writes
its results, and a build command can make them drift (``drift.txt``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sandbox_fakes import vadd_request

from agent import program as prog
from agent.outputs import OutputFile, OutputTolerance, Produced, compare, compare_output, compare_text
from agent.program_sim import SimulatedMachine, load_kernels
from agent.program_steps import Step
from agent.proposal import Attempt, Proposal
from agent.proposer import OptimizeContext, Proposer
from cudasrc.launch import LaunchChange
from sandbox import draws, recorded
from sandbox.capture import parse_all
from sandbox.contract import ArgSpec, Distribution, KernelSource, RequestError, validate_request
from sandbox.testing import FakeExecutor

DATA = Path(__file__).parent / "data"
TABLE = DATA / "program" / "multi_sim.json"
TIGHT = OutputTolerance(1e-6, 0.0)


class OneRewrite(Proposer):
    """Proposes one code rewrite of the kernel (a comment in its body: a different candidate to the
    simulated GPU, which runs it twice as fast), then has nothing more."""

    name = "one-rewrite"

    def __init__(self) -> None:
        self.calls = 0

    def propose(self, context: OptimizeContext, history: Sequence[Attempt], n: int) -> list[Proposal]:
        self.calls += 1
        if self.calls > 1:
            return []
        code = context.target.definition.replace("{", "{\n    // tuned", 1)
        return [Proposal(code=code, description="tuned body")]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(DATA / "capture" / "multi", root)
    shutil.copy(DATA / "program" / "run.py", root / "run.py")
    monkeypatch.setenv("CUDA_AGENT_RECORDED_DIR", str(tmp_path / "recorded"))
    return root


def settings(root: Path, **kw: object) -> prog.ProgramSettings:
    base: dict[str, object] = dict(
        argv=(sys.executable, "run.py"),
        cwd=str(root),
        sources=(str(root),),
        outputs=(OutputFile("out.bin", "float32"), OutputFile("out.txt")),
        tolerance=TIGHT,
        budget_s=30.0,
        runs=2,
        top=2,
        share=0.9,
    )
    base.update(kw)
    return prog.ProgramSettings(**base)  # type: ignore[arg-type]


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.suffix in (".cu", ".cuh", ".cpp")
    }


def run(root: Path, machine: SimulatedMachine | None = None, **kw: object) -> prog.ProgramReport:
    m = machine or SimulatedMachine(load_kernels(TABLE), [str(root)])
    return prog.speedup(settings(root, **kw), m, FakeExecutor(), OneRewrite)


# ------------------------------------------------------------------------------ outputs


def test_numbers_compare_within_tolerance_and_text_exactly() -> None:
    tol = OutputTolerance(1e-3, 0.0)
    assert compare_text("stdout", "loss 0.5000 step 3\n", "loss 0.50001 step 3\n", tol) is None
    d = compare_text("stdout", "loss 0.5000 step 3\n", "loss 0.6 step 3\n", tol)
    assert d is not None and d.where == "line 1, column 6" and (d.before, d.after) == ("0.5000", "0.6")
    assert compare_text("stdout", "status ok\n", "status OK\n", tol) is not None
    assert compare_text("stdout", "a 1 2\n", "a 1 2 3\n", tol) is not None  # one more number
    assert compare_text("stdout", "sm_90 float4 nan\n", "sm_90 float4 nan\n", tol) is None
    assert compare_text("stdout", "x inf\n", "x 1e308\n", tol) is not None
    assert compare_text("stdout", "1e-3\n", "0.001\n", tol) is None


def test_raw_arrays_compare_elementwise_and_bytes_exactly() -> None:
    a = np.arange(8, dtype=np.float32).tobytes()
    b = (np.arange(8, dtype=np.float32) * (1 + 1e-7)).astype(np.float32).tobytes()
    assert compare_output("f", a, b, "float32", OutputTolerance(1e-5, 0)) is None
    c = np.arange(8, dtype=np.float32)
    c[5] = 9
    d = compare_output("f", a, c.tobytes(), "float32", OutputTolerance(1e-5, 0))
    assert d is not None and d.where.startswith("element 5")
    assert compare_output("f", b"\x00\xff", b"\x00\xfe", "auto", TIGHT) is not None
    assert compare_output("f", None, b"x", "auto", TIGHT) is not None  # the run did not write it before
    assert compare_output("f", b"x", None, "auto", TIGHT) is not None  # ... or after


def test_exit_status_and_every_file_are_compared() -> None:
    before = Produced(0, b"ok 1\n", {"a.txt": b"1.0\n"})
    assert compare(before, Produced(0, b"ok 1\n", {"a.txt": b"1.0\n"}), {}, TIGHT) == ()
    found = compare(before, Produced(3, b"ok 1\n", {"a.txt": b"2.0\n"}), {}, TIGHT)
    assert [d.what for d in found] == ["exit status", "a.txt"]


def test_output_file_kinds_parse() -> None:
    assert OutputFile.parse("out.bin:float32") == OutputFile("out.bin", "float32")
    assert OutputFile.parse("C:/x/out.txt") == OutputFile("C:/x/out.txt")  # not a kind: part of the name
    with pytest.raises(ValueError):
        OutputFile.parse("")


# ------------------------------------------------------------------------------ ranking


def test_kernels_rank_by_gpu_time_and_the_hottest_are_chosen_to_the_share() -> None:
    times = {"a": (10, 100, 1, 1), "b": (1, 600, 2, 1), "c": (5, 300, 1, 2)}
    ranked = prog.rank(times, wall_ns=2000, top=3, share=0.8)
    assert [k.kernel for k in ranked] == ["b", "c", "a"]
    assert [k.chosen for k in ranked] == [True, True, False]  # 0.6 + 0.3 reaches 0.8
    assert ranked[0].share == pytest.approx(0.6) and ranked[0].wall_fraction == pytest.approx(0.3)
    assert [k.chosen for k in prog.rank(times, 2000, top=1, share=1.0)] == [True, False, False]


def test_amdahl() -> None:
    assert prog.amdahl([(0.5, 2.0)]) == pytest.approx(1 / 0.75)
    assert prog.amdahl([(0.3, 3.0), (0.2, 2.0)]) == pytest.approx(1 / (0.5 + 0.1 + 0.1))
    assert prog.amdahl([]) == 1.0


def test_the_library_summary_gives_each_kernels_time() -> None:
    summary = {
        "event": "summary",
        "matching": 3,
        "recorded": 0,
        "kernels": {"k(float*)": 3},
        "times": {
            "k(float*)": {"launches": 3, "ns": 4500, "streams": 2, "shapes": {"4,1,1/256,1,1": [3, 4500]}}
        },
        "span_ns": 9000,
    }
    launches, kernels, _, times, span = parse_all([json.dumps(summary)])
    assert launches == () and kernels == {"k(float*)": 3} and span == 9000
    assert times["k(float*)"].ns == 4500 and times["k(float*)"].streams == 2
    assert times["k(float*)"].shapes == {"4,1,1/256,1,1": (3, 4500)}


# ------------------------------------------------------------------------------ recorded inputs


def test_recorded_inputs_are_named_by_digest_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_AGENT_RECORDED_DIR", str(tmp_path))
    data = np.linspace(-3, 7, 10, dtype=np.float32)
    digest = recorded.put(data.tobytes())
    got = draws.generate(
        ArgSpec("x", "in", "float32", 10, Distribution("recorded", source=digest)), draws.Stream(1, 0)
    )
    assert np.array_equal(got, data)
    (tmp_path / digest).write_bytes(b"\x00" * 40)  # altered on disk: refused, not used
    with pytest.raises(recorded.RecordedMissing):
        recorded.load(digest)
    request = vadd_request(KernelSource("", "vadd"), ())
    a = request.bench_problem.args[0]
    bad = replace(a, dist=Distribution("recorded", source="../../etc/passwd"))
    bench = replace(request.bench_problem, args=(bad, *request.bench_problem.args[1:]))
    with pytest.raises(RequestError, match="SHA-256"):
        validate_request(replace(request, bench_problem=bench))


# ------------------------------------------------------------------------------ the flow


def test_without_apply_a_patch_across_files_is_written_and_nothing_is_touched(project: Path) -> None:
    before = snapshot(project)
    report = run(project)
    assert report.outcome is prog.Outcome.PATCH_ONLY and not report.faster
    assert snapshot(project) == before
    assert [k.chosen for k in report.kernels] == [True, True, False, False]
    applied = [r for r in report.rewrites if r.applied]
    assert [r.kernel.split("(")[0] for r in applied] == ["void scale_shift<float, 4>"]
    assert "recorded" in applied[0].verified  # verified on the program's own inputs too
    second = report.rewrites[1]
    assert not second.applied and "another instantiation" in second.reason
    assert "+++ b/inc/kernels.cuh" in report.patch and "// tuned" in report.patch
    # the double instantiation changes with the float one (one definition): predicted with its speedup
    assert report.predicted > 1.0 and report.predicted_gpu == pytest.approx(
        1 / (1 - (0.4444 + 0.3333) / 2), rel=1e-3
    )
    # the patch applies to the untouched project with git
    (project / "p.diff").write_text(report.patch)
    done = subprocess.run(["git", "apply", "--check", "p.diff"], cwd=project, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_apply_rebuilds_reruns_and_reports_faster_only_with_equal_outputs(project: Path) -> None:
    machine = SimulatedMachine(load_kernels(TABLE), [str(project)], speedup=50.0)
    report = run(project, machine, apply=True, build="echo built > build.log")
    assert report.outcome in (prog.Outcome.FASTER, prog.Outcome.NOT_FASTER), report.message
    assert report.compared_equal and machine.builds == ["echo built > build.log"]
    assert "// tuned" in (project / "inc" / "kernels.cuh").read_text()
    assert report.after is not None and report.measured_gpu > 1.5


def test_outputs_within_tolerance_pass(project: Path) -> None:
    report = run(project, apply=True, build="echo 1e-9 > drift.txt", tolerance=OutputTolerance(1e-6, 0))
    assert report.compared_equal, report.differences


def test_changed_outputs_are_refused_and_every_file_restored_byte_for_byte(project: Path) -> None:
    before = snapshot(project)
    machine = SimulatedMachine(load_kernels(TABLE), [str(project)], speedup=1000.0)
    report = run(project, machine, apply=True, build="echo 1e-3 > drift.txt")
    assert report.outcome is prog.Outcome.OUTPUTS_DIFFER and report.outcome.failed
    assert report.reverted and not report.faster and report.measured == 0.0
    assert any("stdout" in d for d in report.differences) and any("out.bin" in d for d in report.differences)
    assert snapshot(project) == before
    assert machine.builds == ["echo 1e-3 > drift.txt", "echo 1e-3 > drift.txt"]  # rebuilt after the revert


def steps_of(project: Path, machine: SimulatedMachine, **kw: object) -> list[Step]:
    told: list[Step] = []
    prog.speedup(settings(project, **kw), machine, FakeExecutor(), OneRewrite, progress=told.append)
    return told


def test_each_step_is_told_as_it_ends_with_the_seconds_since_the_start(project: Path) -> None:
    """A job stopped midway (a device call's time limit) still shows how far it got: every run,
    the ranking, each kernel's capture and optimize start/end, the patch, the rebuild, the re-runs
    and the comparison, each as it ends, in order, with its seconds, as JSON."""
    machine = SimulatedMachine(load_kernels(TABLE), [str(project)], speedup=50.0)
    steps = steps_of(project, machine, apply=True, build="echo built > build.log", top=1)
    runs = ["timed_run", "run", "run"]
    assert [s.step for s in steps] == [
        *runs,
        "ranked",
        "captured",
        "optimize_start",
        "optimize_baseline",
        "optimize_end",
        "patch",
        "applied",
        "build",
        *runs,
        "compared",
    ]
    elapsed = [s.elapsed_s for s in steps]
    assert elapsed == sorted(elapsed) and elapsed[0] > 0
    lines = [json.loads(json.dumps(s.to_json())) for s in steps]
    assert all(line["step"] and line["message"] and "elapsed_s" in line for line in lines)
    by = {line["step"]: line for line in lines}
    assert [line["phase"] for line in lines if line["step"] == "run"] == ["before"] * 2 + ["after"] * 2
    assert lines[0]["kernels_timed"] == 4 and lines[0]["gpu_s"] > 0 and lines[0]["returncode"] == 0
    assert [k["chosen"] for k in by["ranked"]["kernels"]] == [True, False, False, False]
    assert by["captured"]["recorded_inputs"] is True and by["captured"]["launches"] >= 1
    assert by["optimize_start"]["budget_s"] == 30.0
    end = by["optimize_end"]
    assert end["applied"] is True and end["attempts"] >= 1 and end["seconds"] >= end["baseline_s"] >= 0
    assert by["build"]["of"] == "patched" and by["build"]["returncode"] == 0
    assert by["compared"]["equal"] is True


def test_a_refused_patch_tells_the_comparison_the_revert_and_the_rebuild(project: Path) -> None:
    machine = SimulatedMachine(load_kernels(TABLE), [str(project)], speedup=50.0)
    steps = steps_of(project, machine, apply=True, build="echo 1e-3 > drift.txt", top=1)
    assert [s.step for s in steps][-3:] == ["compared", "reverted", "build"]
    compared, reverted, rebuilt = (s.to_json() for s in steps[-3:])
    assert compared["equal"] is False and compared["differences"]
    assert reverted["outcome"] == "outputs_differ" and rebuilt["of"] == "restored"


def test_a_failed_build_is_reverted(project: Path) -> None:
    before = snapshot(project)
    report = run(project, apply=True, build="echo 'error: no' >&2; exit 2")
    assert report.outcome is prog.Outcome.BUILD_FAILED and report.reverted and "error: no" in report.message
    assert snapshot(project) == before


def test_a_program_that_disagrees_with_itself_is_not_optimized(project: Path) -> None:
    (project / "run.py").write_text("import random\nprint(random.random())\n")
    report = run(project, apply=True)
    assert report.outcome is prog.Outcome.UNSTABLE and not report.patch


@pytest.mark.parametrize("drift", ["1e-2", "-5e-4", "nan"])
def test_a_program_whose_outputs_change_is_never_reported_faster(project: Path, drift: str) -> None:
    """However much faster the kernels get, changed outputs mean no speedup is claimed."""
    machine = SimulatedMachine(load_kernels(TABLE), [str(project)], speedup=1e6)
    report = run(
        project, machine, apply=True, build=f"echo {drift} > drift.txt", tolerance=OutputTolerance(1e-4, 1e-6)
    )
    assert not report.faster and not report.compared_equal
    assert report.measured == 0.0 and report.measured_range == (0.0, 0.0) and report.measured_gpu == 0.0


class Relaunch(Proposer):
    """Proposes the kernel with 512-thread blocks (a launch change: every launch site must follow)."""

    name = "relaunch"

    def __init__(self) -> None:
        self.calls = 0

    def propose(self, context: OptimizeContext, history: Sequence[Attempt], n: int) -> list[Proposal]:
        self.calls += 1
        if self.calls > 1:
            return []
        code = context.target.definition.replace("{", "{\n    // 512 threads", 1)
        return [Proposal(code=code, description="bigger blocks", launch=LaunchChange(block="512"))]


def test_a_launch_change_rewrites_launch_sites_in_other_files_and_is_refused_for_templates(
    project: Path,
) -> None:
    s = settings(project, top=4, share=1.0)
    report = prog.speedup(s, SimulatedMachine(load_kernels(TABLE), [str(project)]), FakeExecutor(), Relaunch)
    by_name = {r.kernel.split("(")[0]: r for r in report.rewrites}
    assert not by_name["void scale_shift<float, 4>"].applied
    assert "template kernel" in by_name["void scale_shift<float, 4>"].reason
    assert by_name["smooth3"].applied and by_name["add_rows"].applied
    assert set(report.files) == {str(project / "inc" / "kernels.cuh"), str(project / "src" / "launch.cu")}
    launch_cu = report.patch[report.patch.index("+++ b/src/launch.cu") :]
    assert "+    smooth3<<<(n + (512 - 1)) / 512, 512>>>(u + 1, out + 1, n);" in launch_cu
    assert "+    add_rows<<<dim3((cols + (512 - 1)) / 512, rows), 512>>>(acc, x, rows, cols);" in launch_cu
    assert "// 512 threads" in report.patch


@pytest.mark.slow
def test_the_cli_writes_the_patch_and_exits_non_zero_when_outputs_differ(
    project: Path, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "CUDA_AGENT_TEST_EXECUTOR": "1",
        "CUDA_AGENT_TEST_PROGRAM": str(TABLE),
        "PYTHONPATH": str(Path(__file__).parent.parent),
        "CUDA_AGENT_RECORDED_DIR": str(tmp_path / "rec"),
    }
    before = snapshot(project)
    cmd = [sys.executable, "-m", "server.cli.main", "speedup", "--budget", "5s", "--runs", "2", "--json"]
    cmd += [
        "--output",
        "out.bin:float32",
        "--apply",
        "--build",
        "echo 1 > drift.txt",
        "--",
        sys.executable,
        "run.py",
    ]
    done = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    out = json.loads(done.stdout)
    assert out["outcome"] == "outputs_differ" and out["faster"] is False and out["reverted"] is True
    assert (project / "cuda-agent-speedup.patch").read_text() == out["patch"] != ""
    assert snapshot(project) == before
    assert "Traceback" not in done.stderr
    # the steps, one JSON line each on standard error as they ended (standard output: the report)
    steps = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [s["step"] for s in steps][:2] == ["timed_run", "run"]
    assert [s["step"] for s in steps][-3:] == ["compared", "reverted", "build"]


def test_the_memory_cap_is_raised_when_the_programs_own_sizes_need_it_and_says_why() -> None:
    from agent.target import Target, target_for
    from cudasrc.source import Document

    def target(n: str) -> Target:
        text = (
            f"// @cuda-agent sizes n={n}\n// @cuda-agent launch grid=cdiv(n, block) block=256\n"
            "// @cuda-agent arg x in float[n]\n// @cuda-agent arg y out float[n]\n"
            "__global__ void copy(const float* x, float* y, int n) {\n"
            "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = x[i];\n}\n"
        )
        return target_for(Document(text, "copy.cu"), "copy")

    assert prog.memory_cap(target("1<<20"), 80 << 30) == (None, "")
    budget, why = prog.memory_cap(target("1<<30"), 80 << 30)  # 8 GiB of arrays
    assert budget is not None and budget.gpu_memory_bytes == 24 << 30
    assert "need 8.0 GiB" in why and "from 4 to 24.0 GiB" in why
    budget, why = prog.memory_cap(target("1<<34"), 80 << 30)  # 128 GiB: more than the GPU has
    assert budget is not None and budget.gpu_memory_bytes == int(0.8 * (80 << 30)) and "refused" in why


def test_a_kernel_launched_with_several_shapes_gets_a_spec_that_verifies_each(project: Path) -> None:
    """smooth3 recorded at n=100000 and n=5000: one spec, benchmarked at the first launch's sizes,
    verified at both (and on the recorded inputs)."""
    record = json.loads(load_kernels(TABLE)["smooth3(float const*, float*, int)"].records[0])
    small = json.loads(json.dumps(record))
    n = 5000
    small["index"], small["grid"] = 1, [-(-n // 256), 1, 1]
    u, out, size = small["params"][0]["pointer"], small["params"][1]["pointer"], small["params"][2]
    u["alloc_size"] = out["alloc_size"] = 4 * (2 * n + 4)
    u["region_size"], out["region_size"] = 4 * (n + 3), 4 * (n + 1)
    out["value"] = out["region_start"] = u["base"] + 4 * (n + 3)
    small["params"][1]["hex"] = out["value"].to_bytes(8, "little").hex()
    size["hex"] = n.to_bytes(4, "little").hex()
    share = prog.KernelShare("smooth3(float const*, float*, int)", 2, 1000, 1.0, 0.5, 1, 2, True)
    save = project / "saved"
    save.mkdir()
    for p in record["params"][:2]:  # the first launch's inputs, as the library saves them
        name = f"launch0_param{p['index']}.bin"
        (save / name).write_bytes(bytes(p["pointer"]["region_size"]))
        p["pointer"]["saved"] = name
    launches = parse_all([json.dumps(record), json.dumps(small)])[0]
    prepared = prog.prepare(share, launches, prog._documents([str(project)]), str(save))
    labels = [p.label for p in prepared.target.verify_problems]
    assert labels == ["n=100000", "n=5000", "recorded"]
    assert prepared.target.bench_problem.sizes == {"n": 100000}
    assert "// @cuda-agent verify n=100000,5000\n" in prepared.spec_text
    # a launch change resolves for every problem, the recorded one too (the contract refuses a
    # candidate with fewer launches than problems: what the first GPU run of `speedup` hit)
    relaunch = prepared.target.relaunch
    assert relaunch is not None
    request = prepared.target.request("r", ())
    assert len(relaunch(LaunchChange(block="128"))) == len(request.verify_problems) + 1


def test_the_cli_refuses_bad_options_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from server.cli.main import main

    assert main(["speedup", "--ignore", "(", "--", "true"]) == 2
    assert main(["speedup", "--budget", "soon", "--", "true"]) == 2
    err = capsys.readouterr().err
    assert "--ignore (: not a regular expression" in err and "--budget soon" in err and "Traceback" not in err


def test_a_program_whose_time_is_its_kernels_is_reported_faster_near_amdahls_prediction(
    project: Path,
) -> None:
    """Kernels a thousand times longer (seconds of simulated GPU time per run): the rewrite of the
    hottest one (44% of GPU time, 2x) shows end to end, as Amdahl's law predicts."""
    slow = {
        name: replace(k, ns_per_launch=k.ns_per_launch * 100_000) for name, k in load_kernels(TABLE).items()
    }
    machine = SimulatedMachine(slow, [str(project)])
    report = run(project, machine, apply=True, top=1, runs=3)
    assert report.outcome is prog.Outcome.FASTER and report.faster, report.message
    assert report.compared_equal and report.measured > 1.0
    low, high = report.measured_range
    assert low > 1.0 and low <= report.measured <= high
    assert report.predicted == pytest.approx(report.measured, rel=0.1)  # the python stand-in adds ~0.1 s
