"""bench/program_speedup.py --simulate: the GPU script's plumbing on the simulated GPU (CPU only)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_simulate_mode_writes_a_line_with_every_field(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "program_speedup.py"),
        "--out",
        str(tmp_path),
        "--deadline",
        "120",
    ]
    cmd += ["--simulate", "--budget", "6", "--runs", "2"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = (tmp_path / "program_speedup.jsonl").read_text().splitlines()
    rec = json.loads(line)
    assert rec["outcome"] in ("faster", "not_faster") and rec["outputs_equal"] is True
    assert [k["chosen"] for k in rec["kernels"]] == [True, True, False, False]
    assert rec["files_patched"] and (tmp_path / "multi.patch").read_text().startswith("--- a/")
    assert rec["wall_before_s"]["n"] == 2 and rec["wall_after_s"]["n"] == 2
    assert rec["predicted_speedup"] > 1.0 and rec["measured_gpu_speedup"] > 1.0
    assert any(r["applied"] and "recorded" in r["verified"] for r in rec["rewrites"])
    # each step of the flow as it ended (what a run killed at its time limit leaves behind), also
    # on standard output, the script's seconds added
    steps = [json.loads(x) for x in (tmp_path / "program_speedup.steps.jsonl").read_text().splitlines()]
    assert {s["program"] for s in steps} == {"multi (simulated GPU)"}
    names = [s["step"] for s in steps]
    assert names[:4] == ["timed_run", "run", "run", "ranked"] and names[-1] == "compared"
    assert names.count("optimize_start") == names.count("optimize_end") == 1  # one definition, two kernels
    assert [s["t_s"] for s in steps] == sorted(s["t_s"] for s in steps)
    printed = [json.loads(x) for x in done.stdout.splitlines()]
    assert [s["step"] for s in printed if "step" in s] == names


def _bench() -> Any:
    sys.path.insert(0, str(ROOT / "bench"))
    import program_speedup as bench

    return bench


def test_the_programs_named_by_the_script_are_vendored_with_their_origin() -> None:
    bench = _bench()
    for p in bench.PROGRAMS:
        folder = bench.PROGRAMS_DIR / p.folder
        sources = [f for f in folder.rglob("*") if f.suffix in (".cu", ".cuh", ".cpp", ".h")]
        assert sources, p.name
        for f in sources:
            origin = f.read_text().splitlines()[0]
            assert origin.startswith("// Origin: github.com/") and "vendored unchanged" in origin, f
            licence = origin.split("(", 1)[1].split(")")[0]
            assert licence.startswith("BSD-3-Clause: "), f
            where = licence.removeprefix("BSD-3-Clause: ")
            if where.startswith("bench/"):
                assert "Redistribution" in (ROOT / where).read_text(), f
            else:  # the license is the file's own header
                assert "Redistribution and use in source and binary forms" in f.read_text(), f
        assert (folder / "Makefile").is_file()


def _softmax_at(args: tuple[str, ...], machine_dir: Path) -> Any:
    """The hottest softMax launch the program makes with ``args`` (slices, slice size, ...),
    recorded by the simulated capture with its inputs saved as the library saves them, and the
    target prepared from it."""
    from agent import program as prog
    from agent.program_sim import SimBuffer, SimKernel, SimScalar, SimulatedMachine, launch_record

    bench = _bench()
    slices, size = int(args[0]), int(args[1])
    signature = "softMax(int, int, float const*, float*)"
    arrays = (SimBuffer(4 * slices * size, False), SimBuffer(4 * slices * size, True))
    params = (SimScalar("i", slices), SimScalar("i", size), *arrays)
    record = launch_record(0, signature, (-(-slices // 256), 1, 1), (256, 1, 1), params)
    folder = bench.PROGRAMS_DIR / "softmax"
    machine = SimulatedMachine({signature: SimKernel((record,), 1, 1000)}, [str(folder)])
    save = machine_dir / "saved"
    kernel = prog._kernel_regex(signature)
    run = machine.run(["true"], str(machine_dir), kernel=kernel, max_launches=4, save_dir=str(save))
    share = prog.KernelShare(signature, 1, 1000, 1.0, 0.5, 1, 1, True)
    docs = prog._documents([str(folder)])
    return prog.prepare(share, run.launches, docs, str(save))


def test_the_softmax_entrys_own_inputs_are_saved_so_its_rewrite_is_verified_on_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real run's arguments give arrays under the capture library's save cap: the hottest
    kernel's target gets the ``recorded`` problem, the program's own data, at its own sizes.  At
    the arguments the first H100 run used (100000 x 784: 313 MB each) nothing was saved."""
    from sandbox.capture import SAVE_CAP_BYTES

    monkeypatch.setenv("CUDA_AGENT_RECORDED_DIR", str(tmp_path / "recorded"))
    softmax = next(p for p in _bench().PROGRAMS if p.name == "softmax")
    (tmp_path / "now").mkdir()
    prepared = _softmax_at(softmax.args, tmp_path / "now")
    labels = [q.label for q in prepared.target.verify_problems]
    assert labels[-1] == "recorded", prepared.notes
    sizes = prepared.target.bench_problem.sizes
    assert sizes == {"numSlice": int(softmax.args[0]), "sliceSize": int(softmax.args[1])}
    arrays = [a for a in prepared.target.bench_problem.args if a.role != "scalar"]
    assert sum(4 * a.count for a in arrays) <= SAVE_CAP_BYTES
    (tmp_path / "before").mkdir()
    before = _softmax_at(("100000", "784", "0", "500"), tmp_path / "before")
    assert "recorded" not in [q.label for q in before.target.verify_problems]
    assert any("over the capture's save cap" in n for n in before.notes)


def _launch(p: Any, signature: str) -> Any:
    from agent.program_sim import launch_record
    from sandbox.capture import parse_records

    k = next(k for k in p.simulated.kernels if k.signature == signature)
    (launch,), _, _ = parse_records([launch_record(0, k.signature, k.grid, k.block, k.params)])
    return launch


# each program's hottest kernel on the simulated GPU, the structural rewrite the engine should find
# for it from the captured spec (real sources, the launch the program makes), and the difference
# allowed on the host: attention's column sums of 4096 products of U(-1, 1) values are reordered
# (float rounding: 4096 * 2^-23; on a GPU the calibrated tolerance model allows for it)
HOTTEST = {
    "softmax": ("softMax(int, int, float const*, float*)", "RowParallel", 0.0),
    "attention": (
        "attention_kernel3(float const*, float const*, float*, int, int)",
        "ColumnReduction",
        4096 * 2**-23,
    ),
    "transpose": ("transposeNaive(float*, float const*)", "LoopedTranspose", 0.0),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HOTTEST))
def test_each_programs_hottest_kernel_gets_its_rewrite_equal_under_host_emulation(
    name: str, tmp_path: Path
) -> None:
    """The captured spec of the program's hottest launch (its real source, the program's launch
    configuration) resolves, the engine proposes its structural rewrite, and the rewrite computes
    the original's outputs when both run on the host (bench/corpus_match.py's emulation)."""
    import shutil

    if shutil.which("g++") is None:
        pytest.skip("host emulation needs g++")
    sys.path.insert(0, str(ROOT / "bench"))
    import corpus_match

    from agent import capture as cap
    from agent.target import target_for
    from cudasrc.source import Document
    from engine import NotApplicable, safe_apply
    from engine.registry import candidates
    from sandbox.contract import Tolerance

    bench = _bench()
    p = next(p for p in bench.PROGRAMS if p.name == name)
    signature, wanted, atol = HOTTEST[name]
    launch = _launch(p, signature)
    folder = bench.PROGRAMS_DIR / p.folder
    docs = [Document.from_file(f) for f in cap.source_files([str(folder)])]
    doc, kernel = cap.find_kernel(docs, launch)
    captured = cap.spec_from_launch(doc, kernel, launch)
    t = target_for(
        Document(cap.with_spec(doc, kernel, cap.render(captured.spec)), doc.path), kernel.qualified_name
    )
    base = corpus_match.subject(t, kernel.qualified_name)
    out = next(
        (
            o
            for shape in candidates()
            if getattr(shape, "name", "") == wanted
            and not isinstance(o := safe_apply(shape, base), NotApplicable)
        ),
        None,
    )
    assert out is not None, f"{name}: no {wanted} rewrite of {kernel.name}"
    if atol:
        t = dataclasses.replace(t, tolerance=Tolerance(atol=atol))
    equal, message = corpus_match.emulate(t, out, tmp_path)
    assert equal, message


@pytest.mark.slow
def test_the_vendored_programs_run_the_whole_flow_on_the_simulated_gpu(tmp_path: Path) -> None:
    """`--simulate --only softmax,attention,transpose`: each program's kernels ranked by (simulated)
    GPU time, the hottest captured from its launch, rewritten by the engine and verified (on the
    recorded inputs too), the patch written into its real files (attention: the kernels' header and
    the launch sites in main.cu), rebuilt, re-run and its output compared equal."""
    cmd = [sys.executable, str(ROOT / "bench" / "program_speedup.py"), "--out", str(tmp_path)]
    cmd += [
        "--deadline",
        "600",
        "--simulate",
        "--only",
        "softmax,attention,transpose",
        "--budget",
        "10",
        "--runs",
        "2",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    recs = {
        json.loads(line)["program"]: json.loads(line)
        for line in (tmp_path / "program_speedup.jsonl").read_text().splitlines()
    }
    assert set(recs) == {f"{n} (simulated GPU)" for n in ("softmax", "attention", "transpose")}
    for name, (signature, _, _) in HOTTEST.items():
        rec = recs[f"{name} (simulated GPU)"]
        assert rec["outputs_equal"] is True and rec["outcome"] in ("faster", "not_faster"), rec["message"]
        assert rec["kernels"][0]["kernel"] == signature and rec["kernels"][0]["chosen"]
        shares = [k["share"] for k in rec["kernels"]]
        assert shares == sorted(shares, reverse=True) and abs(sum(shares) - 1.0) < 1e-3
        hottest = next(r for r in rec["rewrites"] if r["kernel"] == signature)
        assert hottest["applied"] and "recorded" in hottest["verified"], hottest
        assert (tmp_path / f"{name}.patch").read_text().startswith("--- a/")
    patched = {Path(f).name for f in recs["attention (simulated GPU)"]["files_patched"]}
    assert "kernels.h" in patched
    transposed = [
        k["kernel"].split("(")[0] for k in recs["transpose (simulated GPU)"]["kernels"] if k["chosen"]
    ]
    assert transposed == ["transposeNaive", "transposeCoalesced"]  # 52% of the GPU time: top 2
