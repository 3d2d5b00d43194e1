"""Spec inference on the real-style programs of tests/data/realcode (bench/spec_inference.py),
and a standalone NVRTC compile of every kernel there."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
import spec_scores

from agent.check import build_options, check_kernel
from agent.target import target_for
from cudasrc.project import display_path
from cudasrc.source import Document
from cudasrc.specs import infer, parse, render, render_inference, roles, verify_sizes
from sandbox.compiler import compile_cuda

REALCODE = Path(__file__).parent / "data" / "realcode"


def test_inferred_specs_match_the_expected_ones() -> None:
    scores, missing = spec_scores.measure(REALCODE)
    assert not missing
    assert len(scores) >= 10
    fields = sum(s.fields for s in scores)
    matched = sum(s.matched for s in scores)
    assert 100.0 * matched / fields >= spec_scores.THRESHOLD, [m for s in scores for m in s.mismatches]


def test_a_wrong_expectation_is_counted_as_a_mismatch(tmp_path: Path) -> None:
    doc = Document.from_file(REALCODE / "matmul.cu")
    k = doc.kernel("sgemm_naive")
    assert k is not None
    wrong = tmp_path / "wrong.spec"
    text = (REALCODE / "expected" / "sgemm_naive.spec").read_text().replace("M=4096", "M=4000")
    wrong.write_text(text)
    s = spec_scores.score(k.name, "matmul.cu", spec_scores.expected_spec(doc, k, wrong), infer(doc, k).spec)
    assert any(m.startswith("size M") for m in s.mismatches)
    assert s.matched < s.fields


def test_values_come_from_the_host_program_path() -> None:
    doc = Document.from_file(REALCODE / "gelu.cu")
    k = doc.kernel("gelu_forward_kernel1")
    assert k is not None
    inf = infer(doc, k)
    # main's B, T, C (not the kernel-local `block_size = blockDim.x`, not warmup()'s 1024)
    assert inf.spec.sizes == {"B": "8", "T": "1024", "C": "768"}
    assert inf.spec.block == ("128",)  # the first of the block sizes the loop tries, and it says so
    assert any("first iteration" in r for r in inf.reasons)
    assert next(a for a in inf.spec.args if a.name == "out").dtype == "bfloat16"  # floatX in common.h


def test_kernel_in_a_header_gets_its_launch_from_the_program_that_includes_it() -> None:
    doc = Document.from_file(REALCODE / "kernels.cuh")
    k = doc.kernel("softmax_forward_kernel1")
    assert k is not None
    inf = infer(doc, k)
    assert inf.spec.sizes == {"B": "8", "T": "1024", "NH": "12"}
    assert any("softmax.cu" in r for r in inf.reasons)


def test_roles_from_the_body_not_from_comments() -> None:
    doc = Document(
        "__global__ void k(float* a, float* b, float* c, float* d, int n) {\n"
        "  // a[i] = 0 is what we would write, c is written\n"
        "  int i = threadIdx.x;\n"
        "  float* row = c + i;\n"
        "  row[0] = a[i] + b[i];\n"
        "  b[i] += 1.0f;\n"
        "  atomicAdd(&d[0], a[i]);\n"
        "}\n"
    )
    k = doc.kernel("k")
    assert k is not None
    assert roles(doc, k) == {"a": "in", "b": "inout", "c": "out", "d": "inout"}


def test_a_header_with_host_code_is_cut_to_what_the_kernel_needs() -> None:
    doc = Document.from_file(REALCODE / "gelu.cu")
    k = doc.kernel("gelu_forward_kernel1")
    assert k is not None
    unit = doc.standalone(k).source
    assert "typedef __nv_bfloat16 floatX;" in unit and "#include <cuda_bf16.h>" in unit
    assert "make_random_float" not in unit and "cuda_check" not in unit and "<stdlib.h>" not in unit
    assert '#include "common.h"' not in unit


@pytest.mark.parametrize(
    ("file", "name"),
    [
        (p.name, k.name)
        for p in sorted([*REALCODE.glob("*.cu"), *REALCODE.glob("*.cuh")])
        for k in Document.from_file(p).kernels
    ],
)
def test_every_realcode_kernel_compiles_standalone(file: str, name: str) -> None:
    doc = Document.from_file(REALCODE / file)
    k = doc.kernel(name)
    assert k is not None
    result = check_kernel(doc, k)
    assert result.ok, [d.message for d in result.diagnostics]


def test_guessed_fields_are_marked_and_certain_ones_carry_their_evidence(tmp_path: Path) -> None:
    doc = Document(  # alone in its project (its folder's parent: not this repository, not other tests')
        "__global__ void k(float* x, float a, int n) { int i = threadIdx.x; if (i < n) x[i] = a; }\n",
        str(tmp_path / "alone" / "lonely.cu"),
    )
    k = doc.kernel("k")
    assert k is not None
    inf = infer(doc, k)
    text = render_inference(inf)
    assert "// guess: value 1.5 guessed\n// @cuda-agent arg a = 1.5" in text
    assert "// guess: no launch found" in text
    reparsed, errors = parse(replace(k, comment=_comment(text)), doc.type_aliases)
    assert not errors and reparsed is not None and render(reparsed) == render(inf.spec)

    program = Document.from_file(REALCODE / "matmul.cu")
    sgemm = program.kernel("sgemm_naive")
    assert sgemm is not None
    found = infer(program, sgemm)
    assert "guess" not in render_inference(found)
    where = {e.field: e.where for e in found.evidence}
    at = f"{display_path(str(REALCODE / 'matmul.cu'))}:"
    assert where["size M"] == at + "32" and where["arg A"] == at + "37"  # the #else branch
    assert where["grid"] == where["block"] == at + "25" and where["arg alpha"] == at + "25"


def _comment(text: str) -> tuple[tuple[int, str], ...]:
    return tuple((i, line.removeprefix("//")) for i, line in enumerate(text.splitlines()))


def test_a_device_function_named_only_as_a_template_argument_is_in_the_unit() -> None:
    path = REALCODE / "trimul.cu"
    spec = (REALCODE / "expected" / "trimul_global.spec").read_text()
    text = path.read_text().replace("template <tri_fn product>", spec + "template <tri_fn product>")
    doc = Document(text, str(path))
    target = target_for(doc, "trimul_global")
    assert "__device__ float matmul_tri_naive" in target.baseline.source
    assert "typedef float (*tri_fn)" in target.baseline.source
    k = doc.kernel("trimul_global")
    assert k is not None and check_kernel(doc, k).ok


def test_one_build_configuration_reaches_the_target_and_every_command(tmp_path: Path) -> None:
    path = Path(__file__).parent / "data" / "needs_define.cu"
    doc = Document.from_file(path)
    k = doc.kernel("scaled")
    assert k is not None
    assert not check_kernel(doc, k).ok  # SCALE is undefined without the build configuration
    options = build_options(path, define=("SCALE=2.0f",))
    assert check_kernel(doc, k, options=options).ok
    target = target_for(doc, "scaled", options)
    assert "-DSCALE=2.0f" in target.baseline.options
    compiled = compile_cuda(
        target.baseline.source, name_expressions=(target.baseline.name,), options=target.baseline.options
    )
    assert compiled.result.ok
    # every command resolves it before it needs a GPU: a bad compile_commands.json is a one-line mistake
    bad = tmp_path / "compile_commands.json"
    bad.write_text("{}")

    def run(command: str) -> subprocess.CompletedProcess[str]:
        args = [
            command,
            str(path.parent) if command == "suite" else str(path),
            "--compile-commands",
            str(bad),
        ]
        if command == "compare":
            args += ["--with", "scaled"]
        if command == "suite":
            args += ["--match", "needs_define.cu"]
        return subprocess.run(
            [sys.executable, "-m", "server", *args], capture_output=True, text=True, timeout=120
        )

    commands = ("check", "bench", "optimize", "compare", "suite")
    with ThreadPoolExecutor(len(commands)) as pool:  # independent processes: both cores at once
        outs = list(pool.map(run, commands))
    for command, out in zip(commands, outs, strict=True):
        assert out.returncode == 2 and "expected a JSON list of compile commands" in out.stderr, (
            command,
            out.stderr,
        )


def test_hostile_host_programs_end_quickly(tmp_path: Path) -> None:
    text = (
        "#define A (A + A)\n"
        "#define F(x) F(F(x))\n"
        "__global__ void k(float* x, int n) { x[threadIdx.x] = 1.0f; }\n"
        "int main() {\n"
        "  int n = A; int m = F(3);\n"
        "  while (1) { n = n + 1; }\n"
        "  for (;;) { main(); }\n"
        "  float* d; cudaMalloc(&d, 1024 * sizeof(float));\n"
        "  k<<<4, 256>>>(d, 1024);\n"
        "  return main();\n"
        "}\n"
    )
    doc = Document(text, str(tmp_path / "alone" / "hostile.cu"))  # no other test's file is searched
    k = doc.kernel("k")
    assert k is not None
    inf = infer(doc, k)  # bounded: no hang, no exception
    assert inf.spec.block == ("256",)
    assert any(a.name == "x" and a.count == "1024" for a in inf.spec.args if hasattr(a, "count"))


def test_the_programs_own_checks_become_require_lines() -> None:
    for file, name, sizes in (
        ("transpose.cu", "transposeNaive", ({"nx": 96, "ny": 96}, {"nx": 992, "ny": 992})),
        (
            "convolution_rows.cu",
            "convolutionRowsKernel",
            ({"imageW": 96, "imageH": 96}, {"imageW": 1008, "imageH": 1008}),
        ),
    ):
        doc = Document.from_file(REALCODE / file)
        k = doc.kernel(name)
        assert k is not None
        inf = infer(doc, k)
        assert inf.spec.requires, inf.reasons  # `if (nx % TILE_DIM || ...) return 1;`, `assert(imageW % ...)`
        assert verify_sizes(inf.spec) == sizes  # so every thread the grid launches has its element
