"""``cuda-agent capture`` on a real run: the multi-file fixture built with nvcc, watched through CUPTI.

Needs a GPU, nvcc, a C++ compiler and CUPTI (the ``nvidia-cuda-cupti`` wheel); skips with the reason
otherwise.  The CPU tests (test_capture.py) check the records -> spec step on the records this run
must produce; here the library has to produce them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from agent import capture as cap
from cudasrc import specs as specs
from cudasrc.source import Document
from sandbox import capture as runner
from sandbox.contract import Launch

pytestmark = pytest.mark.gpu

MULTI = Path(__file__).parent / "data" / "capture" / "multi"
N, ROWS, COLS = 100000, 48, 1000


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not found")
    try:
        runner.build_library()
    except runner.CaptureError as exc:
        pytest.skip(str(exc))
    where = tmp_path_factory.mktemp("multi")
    shutil.copytree(MULTI, where / "multi")
    exe = where / "multi" / "prog"
    subprocess.run(
        ["nvcc", "-O2", "-arch=native", "-o", str(exe), "src/main.cpp", "src/launch.cu", "-Iinc"],
        cwd=where / "multi",
        check=True,
    )
    return exe


def capture(program: Path, capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    from server.cli.main import main

    rc = main(["capture", "--json", "--source", str(program.parent), *args, "--", str(program)])
    out = capsys.readouterr().out
    assert rc == 0, out
    return json.loads(out)


def resolved(result: dict) -> specs.KernelSpec:
    """The captured spec as the kernel's file reads it once the diff is applied."""
    doc = Document(Path(result["file"]).read_text(), result["file"])
    kernel = next(k for k in doc.kernels if k.qualified_name == result["kernel"])
    edited = Document(cap.with_spec(doc, kernel, result["spec"]), result["file"])
    got = specs.spec_for(edited, next(k for k in edited.kernels if k.qualified_name == result["kernel"]))
    assert got.source == "parsed" and got.spec is not None and not got.errors
    return got.spec


def test_the_second_instantiation_of_a_template_is_captured_as_launched(
    program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = capture(program, capsys, "--kernel", r"scale_shift<double")
    assert result["launch"]["kernel"].startswith("void scale_shift<double, 2>")
    assert result["launch"]["grid"] == [-(-N // 128), 1, 1] and result["launch"]["block"] == [64, 1, 1]
    problem = specs.problems(resolved(result))[-1]
    assert problem.launch == Launch((-(-N // 128), 1, 1), (64, 1, 1), 0)
    arrays = {a.name: (a.role, a.dtype, a.count) for a in problem.args if a.role != "scalar"}
    assert arrays == {"x": ("in", "float64", N), "y": ("out", "float64", N)}
    scalars = {a.name: a.value for a in problem.args if a.role == "scalar"}
    assert scalars == {"n": N, "alpha": 0.5, "shift": -1.0}


def test_pointers_into_one_allocation_and_a_2d_launch(
    program: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    smooth = capture(program, capsys, "--kernel", "^smooth3")
    assert "arg u in float[n + 3] uniform(-1, 1) offset=1" in smooth["spec"]
    assert "arg out out float[n + 1]" in smooth["spec"]
    rows = capture(program, capsys, "--kernel", "^add_rows")
    problem = specs.problems(resolved(rows))[-1]
    assert problem.launch == Launch((-(-COLS // 32), ROWS, 1), (32, 1, 1), 0)
    arrays = {a.name: (a.role, a.count) for a in problem.args if a.role != "scalar"}
    assert arrays == {"acc": ("inout", COLS), "x": ("in", ROWS * COLS)}


def test_every_launch_is_timed_on_the_gpu_and_nothing_is_recorded(program: Path) -> None:
    """``times=True, max_launches=0`` (what ``cuda-agent speedup`` ranks kernels with): every
    kernel's launches counted and timed from CUPTI's activity records, no launch recorded."""
    run = runner.run_program([str(program), str(N), "3"], max_launches=0, times=True, capture_stdout=True)
    assert run.returncode == 0 and run.launches == () and not run.errors, run.errors
    assert sorted(run.times) == sorted(run.kernels) and len(run.times) == 4
    for name, t in run.times.items():
        assert t.launches == run.kernels[name] == 3, name
        assert 0 < t.ns < 1e9 and sum(n for n, _ in t.shapes.values()) == 3
    assert 0 < run.gpu_ns <= run.span_ns < run.seconds * 1e9
    assert run.stdout.startswith(b"y[0]=")
