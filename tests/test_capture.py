"""``cuda-agent capture``: launch records -> spec, source matching, the injection library's build.

The records are what ``sandbox/capture/inject.cpp`` writes for the launches of the multi-file
fixture program (tests/data/capture/multi: kernels in inc/kernels.cuh, launchers in src/launch.cu,
sizes in src/main.cpp), at its default sizes; the GPU test (test_capture_gpu.py) checks that the
library writes exactly these for the real program.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from agent import capture as cap
from cudasrc import specs as specs
from cudasrc.source import Document
from sandbox import capture as runner
from sandbox.contract import Launch

MULTI = Path(__file__).parent / "data" / "capture" / "multi"
N, ROWS, COLS = 100000, 48, 1000


class Memory:
    """Device allocations of a recorded run, for writing records the way the library does."""

    def __init__(self) -> None:
        self.next = 0x7F0000000000
        self.allocs: dict[str, tuple[int, int]] = {}

    def alloc(self, name: str, size: int) -> int:
        base = self.next
        self.allocs[name] = (base, size)
        self.next += (size + 0xFFFFF) & ~0xFFFFF
        return base


def pointer_params(params: list[tuple[int, bool]], first_index: int = 0) -> list[dict[str, object]]:
    """``(address, written)`` per pointer -> the library's param records, regions split as it does."""
    out = []
    for i, (value, written) in enumerate(params):
        base, size = next(a for a in MEM.allocs.values() if a[0] <= value < a[0] + a[1])
        same = [v for v, _ in params if base <= v < base + size]
        lower = [v for v in same if v < value]
        higher = [v for v in same if v > value]
        start = value if lower else base
        end = min(higher) if higher else base + size
        out.append(
            {
                "index": first_index + i,
                "offset": 8 * (first_index + i),
                "size": 8,
                "hex": struct.pack("<Q", value).hex(),
                "pointer": {
                    "value": value,
                    "base": base,
                    "alloc_size": size,
                    "region_start": start,
                    "region_size": end - start,
                    "offset": value - start,
                    "before": "00000000000000a1",
                    "after": "00000000000000b2" if written else "00000000000000a1",
                },
            }
        )
    return out


def scalar(index: int, fmt: str, value: float | int, offset: int) -> dict[str, object]:
    raw = struct.pack("<" + fmt, value)
    return {"index": index, "offset": offset, "size": len(raw), "hex": raw.hex()}


MEM = Memory()
XF, YF = MEM.alloc("xf", 4 * N), MEM.alloc("yf", 4 * N)
XD, YD = MEM.alloc("xd", 8 * N), MEM.alloc("yd", 8 * N)
POOL = MEM.alloc("pool", 4 * (2 * N + 4))
ACC, M = MEM.alloc("acc", 4 * COLS), MEM.alloc("m", 4 * ROWS * COLS)


def record(
    index: int, kernel: str, grid: list[int], block: list[int], params: list[dict[str, object]]
) -> str:
    return json.dumps(
        {
            "event": "launch",
            "index": index,
            "api": "__cudaLaunchKernel",
            "kernel": kernel,
            "mangled": "_Z" + kernel.split("(")[0].split()[-1],
            "grid": grid,
            "block": block,
            "smem": 0,
            "params": params,
        }
    )


RECORDS = [
    record(
        0,
        "void scale_shift<float, 4>(float const*, float*, int, float, float)",
        [-(-N // 512), 1, 1],
        [128, 1, 1],
        [
            *pointer_params([(XF, False), (YF, True)]),
            scalar(2, "i", N, 16),
            scalar(3, "f", 2.0, 20),
            scalar(4, "f", 0.25, 24),
        ],
    ),
    record(
        1,
        "void scale_shift<double, 2>(double const*, double*, int, float, double)",
        [-(-N // 128), 1, 1],
        [64, 1, 1],
        [
            *pointer_params([(XD, False), (YD, True)]),
            scalar(2, "i", N, 16),
            scalar(3, "f", 0.5, 20),
            scalar(4, "d", -1.0, 24),
        ],
    ),
    record(
        2,
        "smooth3(float const*, float*, int)",
        [-(-N // 256), 1, 1],
        [256, 1, 1],
        [*pointer_params([(POOL + 4, False), (POOL + 4 * (N + 3), True)]), scalar(2, "i", N, 16)],
    ),
    record(
        3,
        "add_rows(float*, float const*, int, int)",
        [-(-COLS // 32), ROWS, 1],
        [32, 1, 1],
        [*pointer_params([(ACC, True), (M, False)]), scalar(2, "i", ROWS, 16), scalar(3, "i", COLS, 20)],
    ),
    '{"event":"summary","matching":4,"recorded":4,"kernels":{"smooth3(float const*, float*, int)":1}}',
]


def documents() -> list[Document]:
    return [Document(p.read_text(), str(p)) for p in cap.source_files([str(MULTI)])]


def captured(index: int) -> tuple[cap.Captured, Document]:
    launches, _, _ = runner.parse_records(RECORDS)
    doc, kernel = cap.find_kernel(documents(), launches[index])
    return cap.spec_from_launch(doc, kernel, launches[index]), doc


def lines(c: cap.Captured) -> list[str]:
    return [ln.split(specs.MARKER, 1)[1].strip() for ln in c.text.splitlines()]


# ------------------------------------------------------------------------------------ records


def test_records_parse_and_a_line_cut_short_by_a_crash_is_skipped() -> None:
    launches, kernels, errors = runner.parse_records(
        [*RECORDS, '{"event":"error","message":"cuptiSubscribe failed"}', RECORDS[0][:40]]
    )
    assert [x.index for x in launches] == [0, 1, 2, 3]
    assert launches[3].grid == (32, 48, 1) and launches[3].block == (32, 1, 1)
    ptr = launches[2].params[1].pointer
    assert ptr is not None and ptr.written is True and launches[2].params[0].pointer.written is False  # type: ignore[union-attr]
    assert launches[2].params[2].raw == struct.pack("<i", N)
    assert kernels == {"smooth3(float const*, float*, int)": 1}
    assert errors == ("cuptiSubscribe failed",)


@pytest.mark.parametrize(
    ("demangled", "qualified", "targs", "params"),
    [
        ("vadd", "vadd", (), ()),
        ("smooth3(float const*, float*, int)", "smooth3", (), ("float const*", "float*", "int")),
        (
            "void scale_shift<float, 4>(float const*, float*, int, float, float)",
            "scale_shift",
            ("float", "4"),
            5,
        ),
        (
            "void ns::k<float2, (unsigned int)8>(float2*)",
            "ns::k",
            ("float2", "(unsigned int)8"),
            ("float2*",),
        ),
        ("(anonymous namespace)::tile(int*, void*)", "(anonymous namespace)::tile", (), ("int*", "void*")),
    ],
)
def test_demangled_names_are_taken_apart(
    demangled: str, qualified: str, targs: tuple, params: object
) -> None:
    name = cap.parse_name(demangled)
    assert name.qualified == qualified and name.template_args == targs
    assert (len(name.param_types) if isinstance(params, int) else name.param_types) == params


# ------------------------------------------------------------------------------------ specs


def test_a_template_instantiated_twice_gives_each_instantiation_its_spec() -> None:
    f, doc = captured(0)
    d, _ = captured(1)
    assert f.kernel.name == d.kernel.name == "scale_shift" and doc.path.endswith("kernels.cuh")
    assert lines(f) == [
        f"sizes n={N}",
        f"verify n={N}",
        "launch grid=cdiv(n, block * 4) block=128",
        "template float, 4",
        "arg x in float[n] uniform(-1, 1)",
        "arg y out float[n]",
        "arg n = n",
        "arg alpha = 2.0",
        "arg shift = 0.25",
    ]
    assert lines(d) == [
        f"sizes n={N}",
        f"verify n={N}",
        "launch grid=cdiv(n, block * 2) block=64",
        "template double, 2",
        "arg x in double[n] uniform(-1, 1)",
        "arg y out double[n]",
        "arg n = n",
        "arg alpha = 0.5",
        "arg shift = -1.0",
    ]
    # what verification gets equals the launch watched
    for c, grid, block, item in ((f, -(-N // 512), 128, 4), (d, -(-N // 128), 64, 8)):
        problem = specs.problems(c.spec)[-1]
        assert problem.launch == Launch((grid, 1, 1), (block, 1, 1), 0)
        assert [a.count for a in problem.args if a.role != "scalar"] == [N, N]
        assert {a.dtype for a in problem.args if a.role != "scalar"} == {
            "float32" if item == 4 else "float64"
        }


def test_pointers_into_one_allocation_get_their_regions_and_offsets() -> None:
    c, _ = captured(2)
    assert lines(c) == [
        f"sizes n={N}",
        f"verify n={N}",
        "launch grid=cdiv(n, block) block=256",
        "arg u in float[n + 3] uniform(-1, 1) offset=1",
        "arg out out float[n + 1]",
        "arg n = n",
    ]
    problem = specs.problems(c.spec)[-1]
    arrays = {a.name: a for a in problem.args if a.role != "scalar"}
    assert (arrays["u"].count, arrays["u"].offset) == (N + 3, 1)
    assert (arrays["out"].count, arrays["out"].offset) == (N + 1, 0)


def test_2d_launch_product_counts_and_a_written_atomic_target() -> None:
    c, _ = captured(3)
    assert lines(c) == [
        f"sizes rows={ROWS} cols={COLS}",
        f"verify rows={ROWS} cols={COLS}",
        "launch grid=(cdiv(cols, block), rows) block=32",
        "arg acc inout float[cols] uniform(-1, 1)",
        "arg x in float[rows * cols] uniform(-1, 1)",
        "arg rows = rows",
        "arg cols = cols",
    ]
    problem = specs.problems(c.spec)[-1]
    assert problem.launch == Launch((32, 48, 1), (32, 1, 1), 0)


def test_an_output_the_launch_left_unchanged_keeps_its_role_with_a_note() -> None:
    launches, _, _ = runner.parse_records(RECORDS)
    launch = launches[0]
    y = launch.params[1]
    assert y.pointer is not None
    same = y.pointer.__class__(**{**y.pointer.__dict__, "after": y.pointer.before})
    quiet = launch.__class__(
        **{
            **launch.__dict__,
            "params": (launch.params[0], y.__class__(**{**y.__dict__, "pointer": same}), *launch.params[2:]),
        }
    )
    doc, kernel = cap.find_kernel(documents(), quiet)
    c = cap.spec_from_launch(doc, kernel, quiet)
    assert "arg y out float[n]" in lines(c)
    assert any("y: not changed by this launch" in n for n in c.notes)


def test_the_spec_is_written_above_the_kernel_replacing_an_old_one_and_reads_back() -> None:
    c, doc = captured(2)
    stale = doc.text.replace(
        "__global__ void smooth3", "// @cuda-agent sizes n=7\n// keep this comment\n__global__ void smooth3"
    )
    old = Document(stale, doc.path)
    kernel = next(k for k in old.kernels if k.name == "smooth3")
    new = cap.with_spec(old, kernel, c.text)
    assert "sizes n=7" not in new and "// keep this comment\n" + c.text + "__global__ void smooth3" in new
    assert cap.check(new, doc.path, "smooth3") == ()
    patch = cap.diff("inc/kernels.cuh", old.text, new)
    assert "-// @cuda-agent sizes n=7" in patch and f"+// @cuda-agent sizes n={N}" in patch


def test_matching_refuses_another_parameter_list_and_unknown_kernels() -> None:
    launches, _, _ = runner.parse_records(RECORDS)
    short = launches[2].__class__(**{**launches[2].__dict__, "params": launches[2].params[:2]})
    with pytest.raises(cap.CaptureMismatch, match="3 parameters, the launch passed 2"):
        cap.find_kernel(documents(), short)
    other = launches[2].__class__(**{**launches[2].__dict__, "kernel": "nowhere(int)"})
    with pytest.raises(cap.CaptureMismatch, match="not found"):
        cap.find_kernel(documents(), other)
    with pytest.raises(cap.CaptureMismatch, match="launch 9 was not recorded"):
        cap.choose(launches, 9)


def test_source_files_find_the_header_not_the_host_only_files(tmp_path: Path) -> None:
    found = {p.relative_to(MULTI).as_posix() for p in cap.source_files([str(MULTI)])}
    assert found == {"inc/kernels.cuh"}  # launch.cu launches but defines no kernel: no __global__
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "k.cu").write_text("__global__ void k() {}")
    (tmp_path / "k.cu").write_text("__global__ void k() {}")
    assert cap.source_files([str(tmp_path)]) == [tmp_path / "k.cu"]


# ------------------------------------------------------------------------------------ the CLI

FAKE_PROGRAM = """
import os, sys
with open(os.environ["CUDA_AGENT_CAPTURE_OUT"], "a") as f:
    f.write(sys.stdin.read() if False else open(sys.argv[1]).read())
print("program output")
"""


def test_cli_capture_shows_a_diff_and_writes_only_with_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The CLI end to end, with a stand-in program that writes the library's records itself."""
    from server.cli.main import main

    project = tmp_path / "proj"
    (project / "inc").mkdir(parents=True)
    header = project / "inc" / "kernels.cuh"
    header.write_text((MULTI / "inc" / "kernels.cuh").read_text())
    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(RECORDS) + "\n")
    program = tmp_path / "fake.py"
    program.write_text(FAKE_PROGRAM)
    lib = tmp_path / "prebuilt.so"
    lib.write_bytes(b"")
    os.environ["CUDA_AGENT_CAPTURE_LIBRARY"] = str(lib)
    try:
        argv = [
            "capture",
            "--source",
            str(project),
            "--launch",
            "2",
            "--",
            sys.executable,
            str(program),
            str(records),
        ]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert (
            "smooth3(float const*, float*, int): launch 2" in out
            and "+// @cuda-agent arg out out float[n + 1]" in out
        )
        assert "@cuda-agent" not in header.read_text()  # a preview only
        assert main([*argv[:1], "--write", "--json", *argv[1:]]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result["kernel"] == "smooth3" and result["written"] == str(header.resolve())
        assert result["launch"]["grid"] == [-(-N // 256), 1, 1] and result["errors"] == []
        assert result["spec"] in header.read_text()
        assert main(["capture", "--kernel", "(", "--", sys.executable, str(program), str(records)]) == 2
        assert main(["capture", "--source", str(project), "--", "/nonexistent/prog"]) == 1
        assert "program not found" in capsys.readouterr().err
    finally:
        del os.environ["CUDA_AGENT_CAPTURE_LIBRARY"]


# ------------------------------------------------------------------------------------ the library


@pytest.mark.slow  # a g++ build of the injection library
def test_the_injection_library_builds_against_cupti_headers(tmp_path: Path) -> None:
    """g++ against the nvidia-cuda-cupti wheel's headers (or CUDA_AGENT_CUPTI_DIR); needs no GPU."""
    try:
        tc = runner.toolchain()
    except runner.CaptureError as exc:
        pytest.skip(f"cannot build here: {exc}")
    lib = runner.build_library(tmp_path, tc)
    assert lib.is_file() and runner.build_library(tmp_path, tc) == lib  # cached
    symbols = subprocess.run(["nm", "-D", str(lib)], capture_output=True, text=True).stdout
    assert " T InitializeInjection" in symbols


def test_a_cancelled_run_stops_the_program(tmp_path: Path) -> None:
    """The editor's Cancel: the program is stopped and the run says so (the event is already set,
    so the program, which would run for a minute, is stopped at once)."""
    import threading

    cancel = threading.Event()
    cancel.set()
    program = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(runner.CaptureError, match="cancelled"):
        runner.run_program(program, library=tmp_path / "never-loaded.so", interactive=False, cancel=cancel)


def test_a_kernel_without_integer_parameters_gets_its_arrays_count_as_its_size() -> None:
    """NVIDIA's blog transpose reads its extent from gridDim: the captured spec still has a size
    (the largest array's count, so it parses and verifies) and writes the counts with it."""
    from agent.program_sim import SimBuffer, launch_record
    from sandbox.capture import parse_records

    root = Path(__file__).resolve().parent.parent / "bench" / "programs" / "transpose"
    doc = Document.from_file(root / "transpose.cu")
    matrix = (SimBuffer(4 * 64 * 64, True), SimBuffer(4 * 64 * 64, False))
    (launch,), _, _ = parse_records(
        [launch_record(0, "transposeNaive(float*, float const*)", (2, 2, 1), (32, 8, 1), matrix)]
    )
    c = cap.spec_from_launch(doc, doc.kernel("transposeNaive"), launch)  # type: ignore[arg-type]
    assert dict(c.spec.sizes) == {"n": "4096"}
    assert [(a.name, a.role, a.count) for a in c.spec.args if isinstance(a, specs.ArraySpec)] == [
        ("odata", "out", "n"),
        ("idata", "in", "n"),
    ]
    text = cap.with_spec(doc, doc.kernel("transposeNaive"), cap.render(c.spec))  # type: ignore[arg-type]
    k = Document(text, doc.path).kernel("transposeNaive")
    assert k is not None
    spec, errors = specs.parse(k)
    assert spec is not None and not errors
