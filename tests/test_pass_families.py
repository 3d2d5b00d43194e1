"""The pass families, driven by folders: ``tests/data/passes/<module>/`` holds kernels (each with its
spec) that the pass of ``engine/<module>.py`` must match — the same computation spelled
as real code spells it — and kernels it must refuse (``*_refused.cu``, whose first line is
``// refused: <part of the reason>``).  Every match is rewritten with every parameter value of the
pass and compiled with NVRTC, and its best guess (and last value) is run in host emulation at the
spec's odd verify sizes against the original; on the GPU (``gpu`` marker) every parameter value
is verified against the original by the sandbox.  Adding a pass needs a folder, no case list."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_transforms import DATA as HOST_HEADER_DIR
from test_transforms import assert_all_verified, compiles, host_program, target

from agent.target import Target, target_for
from cudasrc import specs as spec_mod
from cudasrc.source import Document
from engine import NotApplicable, Subject
from engine.elementwise import GridStride, Vectorize
from engine.guards import launch_covers
from engine.passes import Apply, Pass
from engine.registry import PASSES
from sandbox.contract import Candidate, EvalOptions, EvalRequest

FAMILIES = Path(__file__).parent / "data" / "passes"
GXX = ("g++", "-std=c++20", "-pthread", "-O1", "-ffp-contract=off", "-w", "-DHOST_CUDA_THREADS")
FOLDERS = sorted(p for p in FAMILIES.iterdir() if p.is_dir())


def family_pass(family: str) -> Pass[Any]:
    (found,) = [p for p in PASSES if type(p).__module__.rsplit(".", 1)[-1] == family]
    return found


def kernels(refused: bool) -> list[tuple[str, str]]:
    return [
        (folder.name, f.name)
        for folder in FOLDERS
        for f in sorted(folder.glob("*.cu"))
        if f.name.endswith("_refused.cu") == refused
    ]


MATCHES = kernels(refused=False)
REFUSALS = kernels(refused=True)
# the host emulation (a g++ build and a fiber per CUDA thread: seconds each) of every match runs
# in the full run; the default run emulates each family's first match
FIRST = {family: file for family, file in reversed(MATCHES)}
EMULATED = [
    pytest.param(family, file, marks=() if FIRST[family] == file else pytest.mark.slow)
    for family, file in MATCHES
]


def subject(t: Target) -> Subject:
    """The target's kernel under its spec in its unit (as the search builds it: the file's macros,
    aliases, device functions and shared-memory wrappers known), element types seen through the
    file's aliases."""
    doc = Document(t.text, t.path)
    k = doc.kernel_at(t.text.count("\n", 0, t.definition_start))
    assert k is not None
    spec, errors = spec_mod.parse(k, doc.type_aliases, doc.integer_constants)
    assert spec is not None and not errors, errors
    return Subject(t.definition, spec, context=t.baseline.source)


def load(family: str, file: str) -> tuple[Target, Subject, Pass[Any]]:
    t = target(file, folder=FAMILIES / family)
    return t, subject(t), family_pass(family)


def applied(t: Target, s: Subject, p: Pass[Any], params: object) -> Subject:
    out = Apply(p, params).apply(s)
    assert not isinstance(out, NotApplicable), (t.path, params, out.reason)
    return s.then(out)


def fitting(s: Subject, p: Pass[Any], params: object) -> Subject | None:
    """``s`` rewritten by ``p`` with ``params``, or None where that value does not fit the match."""
    out = Apply(p, params).apply(s)
    return None if isinstance(out, NotApplicable) else s.then(out)


def test_every_family_folder_has_a_registered_pass_four_matches_and_a_refusal() -> None:
    assert FOLDERS
    for folder in FOLDERS:
        family_pass(folder.name)
        assert sum(f == folder.name for f, _ in MATCHES) >= 4, folder.name
        assert any(f == folder.name for f, _ in REFUSALS), folder.name


@pytest.mark.parametrize("family, file", MATCHES)
def test_match_rewrites_compile_with_nvrtc_for_every_parameter(family: str, file: str) -> None:
    t, s, p = load(family, file)
    found = p.match(s.normalized.view)
    assert not isinstance(found, NotApplicable), found.reason
    assert p.guess(found) in p.space
    applied(t, s, p, p.guess(found))  # the guess applies; other values may not fit this match
    for params in p.space:
        out = fitting(s, p, params)
        if out is None:
            continue
        assert out.code != s.code or out.launch != s.launch
        try:
            compiles(t, out.code)
        except Exception as exc:  # the compiler itself is missing, not a compile error
            if type(exc).__name__ == "CompilerUnavailable":
                pytest.skip(f"NVRTC is not available: {exc}")
            raise
        if out.launch.grid or out.launch.block:
            assert t.relaunch is not None and len(t.relaunch(out.launch)) == len(t.problems)


def test_stencil_keeps_the_block_where_the_output_store_is_unguarded() -> None:
    """The spec's grid over a new block may run threads the original's does not (cols=48 in 32-wide
    blocks): with no bounds check on the store they would store past each row, so the rewrite keeps
    the spec's 16x16 block for every parameter value; behind a bounds check (``if (i >= w || j >=
    h) return;``) the threads past the image store nothing and the rewrite takes the new block."""
    p = family_pass("stencil")
    t, s, _ = load("stencil", "unguarded_store.cu")
    kept = [out for params in p.space if (out := fitting(s, p, params)) is not None]
    assert kept and all(out.launch.block is None for out in kept)
    assert all("per 16x16 block" in out.code for out in kept)
    t, s, _ = load("stencil", "jacobi_like.cu")
    assert applied(t, s, p, (32, 8, 8)).launch.block == "(32, 8)"


def test_stencil_reads_rows_along_the_thread_axis_the_access_maps_give() -> None:
    """Where every read steps by one element as ``threadIdx.y`` steps (``src[i * w + j]`` with ``i``
    the thread's x index), the image's rows run along x: the tile is indexed ``[threadIdx.x][threadIdx.y]``
    and its origin follows ``blockIdx.x`` for rows, ``blockIdx.y`` for columns; a row-major image
    over ``(x, y)`` keeps the usual axes."""
    p = family_pass("stencil")
    t, s, _ = load("stencil", "rows_along_x.cu")
    found = p.match(s.normalized.view)
    assert not isinstance(found, NotApplicable), found.reason
    assert found.axes == ("x", "y")
    out = applied(t, s, p, (32, 8, 2))  # 32 + 4 rows of 8 + 4 columns, the pitch odd
    assert (
        "tile[36][13];" in out.code
        and "blockIdx.x * 32) - 2" in out.code
        and "blockIdx.y * 8) - 2" in out.code
    )
    assert "[(int)threadIdx.x + 2 + (-1)][(int)threadIdx.y + 2 + (0)]" in out.code
    _, s, _ = load("stencil", "jacobi_like.cu")
    found = p.match(s.normalized.view)
    assert not isinstance(found, NotApplicable) and found.axes == ("y", "x")


@pytest.mark.parametrize("family, file", REFUSALS)
def test_refusal_gives_its_reason(family: str, file: str) -> None:
    _, s, p = load(family, file)
    first = (FAMILIES / family / file).read_text().splitlines()[0]
    assert first.startswith("// refused: "), "a refused kernel's first line names the reason"
    found = p.match(s.normalized.view)
    assert isinstance(found, NotApplicable)
    assert first.removeprefix("// refused: ") in found.reason


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ for the host emulation")
@pytest.mark.parametrize("family, file", EMULATED)
def test_match_computes_the_same_outputs_in_host_emulation(family: str, file: str, tmp_path: Path) -> None:
    """The best guess and the last parameter value, on the CPU (tests/data/transforms/host_cuda.h,
    a fiber per CUDA thread), at the spec's verify sizes, aligned and misaligned arrays."""
    t, s, p = load(family, file)
    found = p.match(s.normalized.view)
    assert not isinstance(found, NotApplicable), found.reason
    guess = applied(t, s, p, p.guess(found))
    for k, params in enumerate(dict.fromkeys((p.guess(found), p.space[-1]))):
        out = guess if k == 0 else fitting(s, p, params)
        if out is not None:
            emulate(t, out, tmp_path / f"emulate{k}")


def emulate(t: Target, out: Subject, stem: Path) -> None:
    """Run the original and ``out`` in host emulation; their outputs agree."""
    src = stem.with_suffix(".cpp")
    program = host_program(t, out)
    base = t.kernel.split("<")[0]
    for unit in ("orig", "cand"):  # host_program launches the bare name: give a template its arguments
        program = program.replace(f"launch({unit}::{base},", f"launch({unit}::{t.kernel},")
    src.write_text(program)
    build = subprocess.run(
        [*GXX, f"-I{HOST_HEADER_DIR}", str(src), "-o", str(stem)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert build.returncode == 0, build.stderr[:3000]
    run = subprocess.run([str(stem)], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    # sums may differ in the last bits where a rewrite changes the order of additions (a scan)
    allowed = max(1e-5, (t.tolerance.atol or 0.0) if t.tolerance else 0.0)
    assert float(run.stdout) <= allowed, f"{out.applied}: outputs differ by {run.stdout.strip()}"


@pytest.mark.gpu
@pytest.mark.parametrize("family", [folder.name for folder in FOLDERS])
def test_every_parameter_of_every_match_is_equivalent_on_the_gpu(family: str) -> None:
    """Each kernel of the family's folder with every parameter value of its pass that fits it,
    verified against the original by the sandbox at the spec's verify sizes."""
    from sandbox.local import LocalExecutor

    with LocalExecutor() as executor:
        for _, file in [m for m in MATCHES if m[0] == family]:
            t, s, p = load(family, file)
            candidates = []
            for k, params in enumerate(p.space):
                out = fitting(s, p, params)
                if out is None:
                    continue
                launches = None
                if (out.launch.grid or out.launch.block) and t.relaunch is not None:
                    *verify, _ = t.relaunch(out.launch)
                    launches = (*verify, verify[-1])
                source = dataclasses.replace(t.baseline, source=t.unit_with(out.code))
                candidates.append(
                    Candidate(
                        f"p{k}_" + "".join(c if c.isalnum() else "_" for c in repr(params)), source, launches
                    )
                )
            assert candidates
            request = EvalRequest(
                id=f"passes-{family}-{file}",
                baseline=t.baseline,
                candidates=tuple(candidates),
                verify_problems=t.verify_problems,
                bench_problem=t.verify_problems[-1],
                seeds=(3, 4),
                tolerance=t.tolerance,
                options=EvalOptions(time=False),
            )
            assert_all_verified(executor.evaluate(request), f"{family}/{file}")


# the naive bench kernel of each family (bench/kernels/), matched by its pass as the suite finds it
BENCH = (
    ("stencil", "conv2d.cu"),
    ("stencil", "stencil2d.cu"),
    ("column_reduction", "column_sum.cu"),
    ("launch_fill", "softmax_one_block.cu"),
    ("whole_grid", "gelu_bf16_whole_grid.cu"),
    ("block_scan", "row_scan.cu"),
    ("block_scan", "block_scan.cu"),
    ("permute", "batched_transpose.cu"),
)


@pytest.mark.slow
@pytest.mark.parametrize("family, file", BENCH)
def test_the_family_bench_kernel_is_matched_and_its_guess_compiles_and_emulates(
    family: str, file: str, tmp_path: Path
) -> None:
    t = target(file)
    s, p = subject(t), family_pass(family)
    found = p.match(s.normalized.view)
    assert not isinstance(found, NotApplicable), found.reason
    out = applied(t, s, p, p.guess(found))
    compiles(t, out.code)
    if shutil.which("g++") is not None:
        emulate(t, out, tmp_path / "emulate")


def _inline(tmp_path: Path, source: str) -> tuple[Target, Subject]:
    path = tmp_path / "kernel.cu"
    path.write_text(source)
    t = target_for(Document.from_file(path))
    return t, subject(t)


_HALVE = """// @cuda-agent sizes n=1<<12 verify n=768,2560
// @cuda-agent launch grid=n / block block=256
// @cuda-agent arg x in float[n] uniform(-1, 1)
// @cuda-agent arg y out float[n]
// @cuda-agent arg count = n
__global__ void halve(const float* x, float* y, int count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    y[i] = 0.5f * x[i];
}
"""


def test_the_launch_covers_the_parameters_that_give_its_extent(tmp_path: Path) -> None:
    """:func:`engine.guards.launch_covers`: the extent along an axis as the scalar parameters equal
    to it at every problem (``w`` along x, ``h`` along y), then an array's count over them."""
    _, s = _inline(
        tmp_path,
        """// @cuda-agent sizes w=1024 h=64 verify w=64,96 h=8,40
// @cuda-agent launch grid=(w / 32, h / 8) block=(32, 8)
// @cuda-agent arg a in float[w * h] uniform(-1, 1)
// @cuda-agent arg b out float[w * h]
// @cuda-agent arg w = w
// @cuda-agent arg h = h
__global__ void copy2d(const float* a, float* b, int w, int h) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    b[y * w + x] = a[y * w + x];
}
""",
    )
    view = s.normalized.view
    assert launch_covers(view, "x") == ["w"] and launch_covers(view, "y") == ["h"]
    _, flat = _inline(
        tmp_path,
        """// @cuda-agent sizes w=1024 h=64 verify w=64,96 h=8,40
// @cuda-agent launch grid=w * h / block block=256
// @cuda-agent arg a in float[w * h] uniform(-1, 1)
// @cuda-agent arg b out float[w * h]
// @cuda-agent arg w = w
// @cuda-agent arg h = h
__global__ void copy(const float* a, float* b, int w, int h) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    b[i] = a[i];
}
""",
    )
    assert launch_covers(flat.normalized.view, "x") == ["w * h"]


@pytest.mark.parametrize("transform", [GridStride(4), Vectorize(16)])
def test_elementwise_passes_loop_an_unguarded_kernel_to_the_parameter_the_launch_covers(
    transform: Pass[Any], tmp_path: Path
) -> None:
    """No bounds check, but the launch's threads are exactly ``count`` at every problem: the
    rewrite's loop stops there, and computes the original's outputs."""
    t, s = _inline(tmp_path, _HALVE)
    out = Apply(transform, transform).apply(s)
    assert not isinstance(out, NotApplicable), out.reason
    rewritten = s.then(out)
    assert "(long long)(count)" in rewritten.code
    emulate(t, rewritten, tmp_path / "emulate")


@pytest.mark.parametrize(
    "change, reason",
    [  # an offset index (NVIDIA's coalescing demo): not one element per thread at [i]
        (("int i = blockIdx.x * blockDim.x + threadIdx.x;", "int i = blockIdx.x * blockDim.x + threadIdx.x + 1;"),
         "offsets or scales the global x index"),
        # no parameter says the launch's extent: the loop would not know where to stop
        (("// @cuda-agent arg count = n\n", "// @cuda-agent arg count = 7\n"), "no scalar parameter gives"),
    ],
)  # fmt: skip
def test_elementwise_passes_refuse_an_unguarded_kernel_they_cannot_bound(
    change: tuple[str, str], reason: str, tmp_path: Path
) -> None:
    source = _HALVE.replace(*change).replace("float[n]", "float[n + 1]")
    _, s = _inline(tmp_path, source)
    for transform in (GridStride(), Vectorize()):
        found = transform.match(s.normalized.view)
        assert isinstance(found, NotApplicable) and reason in found.reason, found
