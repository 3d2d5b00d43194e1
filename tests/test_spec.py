"""Kernel specs: grammar, errors with lines, safe expressions, resolution to contract problems, inference."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from cudasrc.dtypes import canonical_dtype, dtype_bytes
from cudasrc.source import Document
from cudasrc.specs import (
    InvalidSpec,
    KernelSpec,
    ScalarSpec,
    evaluate,
    infer,
    misplaced,
    parse,
    problem,
    problems,
    render,
    spec_for,
    verify_sizes,
)
from cudasrc.syntax import Kernel
from sandbox.contract import Distribution


def load(data_dir: Path, name: str) -> Document:
    return Document.from_file(data_dir / name)


def kernel(doc: Document, name: str) -> Kernel:
    k = doc.kernel(name)
    assert k is not None
    return k


def parsed(doc: Document, name: str) -> KernelSpec:
    spec, errors = parse(kernel(doc, name))
    assert errors == ()
    assert spec is not None
    return spec


def line_of(doc: Document, needle: str) -> int:
    return next(i for i, line in enumerate(doc.text.splitlines()) if needle in line)


def test_vadd_resolves_to_verify_and_bench_problems(data_dir: Path) -> None:
    spec = parsed(load(data_dir, "vector_ops.cu"), "vadd")
    *verify, bench = problems(spec)
    assert [p.sizes for p in verify] == [{"n": 1000}, {"n": 4097}]
    assert bench.sizes == {"n": 1 << 24}
    assert bench.launch.block == (256, 1, 1)
    assert bench.launch.grid == ((1 << 24) // 256, 1, 1)
    assert verify[1].launch.grid == (17, 1, 1)  # cdiv(4097, 256)
    a, _, c, n = bench.args
    assert (a.role, a.dtype, a.count, a.dist) == (
        "in",
        "float32",
        1 << 24,
        Distribution("uniform", -1.0, 1.0),
    )
    assert (c.role, c.count) == ("out", 1 << 24)
    assert (n.role, n.dtype, n.value) == ("scalar", "int32", float(1 << 24))
    assert bench.bytes_moved == 12 * (1 << 24)  # default: two inputs and one output of floats


def test_tuner_block_override_moves_the_grid(data_dir: Path) -> None:
    spec = parsed(load(data_dir, "vector_ops.cu"), "vadd")
    for block in (32, 128, 1024):
        p = problem(spec, {"n": 4097}, block=block)
        assert p.launch.block == (block, 1, 1)
        assert p.launch.grid[0] == -(-4097 // block)
    assert [p.launch.block for p in problems(spec, block=64)] == [(64, 1, 1)] * 3


def test_vector_types_scalars_work_and_constants(data_dir: Path) -> None:
    doc = load(data_dir, "vector_ops.cu")
    saxpy = problem(parsed(doc, "saxpy4"), {"n": 1000})
    by_name = {a.name: a for a in saxpy.args}
    assert (by_name["x"].dtype, by_name["x"].dist) == ("float4", Distribution("uniform", -2.0, 2.0))
    assert (by_name["y"].role, by_name["alpha"].value) == ("inout", 0.5)
    assert (saxpy.bytes_moved, saxpy.flops) == (3 * 16 * 1000, 8 * 1000)
    assert saxpy.launch.block == (128, 1, 1)
    poly = problem(parsed(doc, "poly_eval"), {"n": 10})
    (const,) = poly.constants
    assert (const.name, const.dtype, const.count) == ("kPoly", "float32", 4)


def test_template_instantiation_and_tolerance(data_dir: Path) -> None:
    spec = parsed(load(data_dir, "reduce.cu"), "block_sum")
    assert spec.name_expression == "block_sum<float, 256>"
    assert spec.tolerance is not None and (spec.tolerance.atol, spec.tolerance.rtol) == (1e-4, 1e-5)
    p = problem(spec, {"n": 1000})
    assert {a.name: a.count for a in p.args}["partial"] == 4
    assert {a.name: a.dtype for a in p.args}["in"] == "float32"  # `T` bound by `template float, 256`


def test_errors_carry_their_lines(data_dir: Path) -> None:
    doc = load(data_dir, "spec_errors.cu")
    _, errors = parse(kernel(doc, "scale"))
    found = {(e.line, e.message.split(":")[0]) for e in errors}
    assert (line_of(doc, "block=BLOCK"), "launch") in found
    assert (line_of(doc, "floot"), "arg") in found
    assert (line_of(doc, "gaussian"), "arg") in found
    assert (line_of(doc, "arg z in"), "arg") in found
    assert (line_of(doc, "atol=tiny"), "tolerance") in found
    assert not any("`x` has no `arg` line" in e.message for e in errors)  # its line had an error instead
    _, errors2 = parse(kernel(doc, "scale2"))
    assert [e.line for e in errors2] == [line_of(doc, "__import__")]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["sizes n=100", "arg x in float[n]"], "parameter `y` has no `arg` line"),
        (["sizes n=100 m=5", "arg x in float[n]", "arg y out float[n]"], "no `launch grid=...`"),
        (["sizes n=100", "arg x in float[n]", "arg y out float[n]", "verify n=0"], "grid"),
        (["sizes n=100", "arg x in float[n]", "arg y out float[n]", "launch block=2048"], "1..1024 threads"),
        (["sizes n=100", "arg x in float[n]", "arg y out float[n]", "verify m=3"], "unknown size m"),
        (["sizes n=100", "arg x = 3", "arg y out float[n]"], "is a pointer"),
        (
            ["sizes n=100", "arg n in int[n]", "arg x in float[n]", "arg y out float[n]"],
            "is a scalar parameter",
        ),
        (["sizes n=100", "frobnicate", "arg x in float[n]", "arg y out float[n]"], "unknown directive"),
        (["sizes n=100", "arg x in float[n] uniform(1, 0)", "arg y out float[n]"], "low must be below high"),
        (["sizes n=100", "arg x in float[n] randint(0)", "arg y out float[n]"], "takes 2 argument"),
    ],
)
def test_spec_mistakes(lines: list[str], message: str) -> None:
    text = "".join(f"// @cuda-agent {line}\n" for line in lines)
    doc = Document(text + "__global__ void k(const float* x, float* y, int n) { y[0] = x[0]; }\n")
    spec, errors = parse(doc.kernels[0])
    assert spec is not None
    assert any(message in e.message for e in errors), errors
    assert all(0 <= e.line < len(lines) for e in errors)


def test_expressions_are_evaluated_safely() -> None:
    env = {"n": 1000, "block": 256}
    assert evaluate("cdiv(n, block)", env) == 4
    assert evaluate("(n + block - 1) / block", env) == 4  # C integer division
    assert evaluate("-7 / 2", {}) == -3  # truncates toward zero, like C
    assert evaluate("min(n, 1 << 10) * 2 + max(1, 2) % 3 >> 1", env) == 1001
    assert evaluate("1.5 * n", env) == 1500.0
    for bad in (
        "__import__('os')",
        "n.__class__",
        "[1]",
        "lambda: 1",
        "2 ** 10",
        "1 << 100000",
        "x",
        "n /",
        "9" * 30 + "*" + "9" * 30,
        "1+" * 400 + "1",
        "(" * 300 + "1" + ")" * 300,
    ):
        with pytest.raises(ValueError):
            evaluate(bad, env)
    with pytest.raises(ValueError, match="divides by zero"):
        evaluate("n // 0", env)


@pytest.mark.parametrize(
    ("ctype", "dtype", "size"),
    [
        ("float", "float32", 4),
        ("double", "float64", 8),
        ("__half", "float16", 2),
        ("__nv_bfloat16", "bfloat16", 2),
        ("const int", "int32", 4),
        ("unsigned", "uint32", 4),
        ("unsigned int", "uint32", 4),
        ("long long", "int64", 8),
        ("size_t", "uint64", 8),
        ("int64_t", "int64", 8),
        ("uint8_t", "uint8", 1),
        ("signed char", "int8", 1),
        ("unsigned short", "uint16", 2),
        ("bool", "bool", 1),
        ("float2", "float2", 8),
        ("float4", "float4", 16),
        ("int4", "int4", 16),
        ("uint4", "uint4", 16),
        ("double2", "double2", 16),
        ("__half2", "half2", 4),
        ("float32", "float32", 4),
    ],
)
def test_element_types(ctype: str, dtype: str, size: int) -> None:
    assert canonical_dtype(ctype) == dtype
    assert dtype_bytes(dtype) == size


def test_unknown_element_type() -> None:
    assert canonical_dtype("MyStruct") is None


def test_default_verify_sizes_are_small_and_not_block_multiples() -> None:
    doc = Document(
        "// @cuda-agent sizes n=1<<20 m=2*n\n"
        "// @cuda-agent launch grid=cdiv(n, block) block=256\n"
        "// @cuda-agent arg x in float[m]\n"
        "__global__ void k(const float* x, int n, int m) {}\n"
    )
    spec, errors = parse(doc.kernels[0])
    assert errors == () and spec is not None
    sizes = verify_sizes(spec)
    assert sizes == ({"n": 97, "m": 194}, {"n": 1021, "m": 2042})  # derived sizes follow
    assert all(s["n"] % 32 for s in sizes)


@pytest.mark.parametrize(
    ("fixture", "name"),
    [("vector_ops.cu", k) for k in ("vadd", "saxpy4", "poly_eval")] + [("reduce.cu", "block_sum")],
)
def test_render_round_trips(data_dir: Path, fixture: str, name: str) -> None:
    doc = load(data_dir, fixture)
    spec = parsed(doc, name)
    k = kernel(doc, name)
    start = k.comment[0][0]
    stripped = doc.apply_change(start, 0, k.span.start_line, 0, render(spec))
    again = parsed(stripped, name)
    assert _normal(again) == _normal(spec)
    assert problems(again) == problems(spec)


def _normal(spec: KernelSpec) -> KernelSpec:
    """The spec without source lines (which move when the comment block is rewritten)."""
    return replace(
        spec,
        lines={},
        args=tuple(replace(a, line=-1) for a in spec.args),
        constants=tuple(replace(c, line=-1) for c in spec.constants),
    )


def test_inference_from_2d_launch_and_allocations(data_dir: Path) -> None:
    doc = load(data_dir, "host_infer.cu")
    inf = infer(doc, kernel(doc, "scale_shift"))
    assert inf.confidence == "high", inf.reasons
    spec = inf.spec
    assert spec.sizes == {"rows": "2048", "cols": "3000"}
    assert spec.block == ("32", "8")
    roles = {a.name: (a.role, a.count) for a in spec.args if not isinstance(a, ScalarSpec)}
    assert roles == {"in": ("in", "rows * cols"), "out": ("out", "rows * cols")}
    bench = problems(spec)[-1]
    assert bench.launch.block == (32, 8, 1)
    assert bench.launch.grid == (-(-3000 // 32), 2048 // 8, 1)  # covers cols x rows
    assert any("allocation" in r for r in inf.reasons)


def test_inference_from_signature_only(data_dir: Path) -> None:
    doc = load(data_dir, "host_infer.cu")
    inf = infer(doc, kernel(doc, "accumulate"))
    assert inf.confidence == "medium"
    roles = {a.name: a.role for a in inf.spec.args if not isinstance(a, ScalarSpec)}
    assert roles == {"acc": "inout", "x": "in"}  # acc[i] += ... reads acc
    assert any("no launch site" in r for r in inf.reasons)


def test_inference_from_host_variables_and_launch(data_dir: Path) -> None:
    text = (data_dir / "vector_ops.cu").read_text().replace("@cuda-agent", "(spec removed)")
    doc = Document(text)
    inf = infer(doc, kernel(doc, "vadd"))
    assert inf.confidence == "high", inf.reasons
    assert inf.spec.sizes == {"n": "1 << 20"}
    roles = {a.name: (a.role, a.count) for a in inf.spec.args if not isinstance(a, ScalarSpec)}
    assert roles == {"a": ("in", "n"), "b": ("in", "n"), "c": ("out", "n")}
    # `blocks = (N + threads - 1) / threads` with `threads = BLOCK_SIZE`: the grid follows the block
    assert problem(inf.spec, {"n": 1000}, block=64).launch.grid == (16, 1, 1)
    gather = infer(doc, kernel(doc, "gather"))
    idx = next(a for a in gather.spec.args if a.name == "idx")
    assert problem(gather.spec, {"n": 50}).args[1].dist == Distribution("randint", 0.0, 50.0)
    assert idx.role == "in"


def test_inference_of_templated_launch(data_dir: Path) -> None:
    doc = load(data_dir, "reduce.cu")
    inf = infer(replace_spec_free(doc), kernel(replace_spec_free(doc), "block_sum"))
    assert inf.spec.template_args == ("float", "256")  # kDefaultBlock resolved
    assert inf.confidence == "high", inf.reasons
    assert problem(inf.spec, {"n": 1000}).args[1].count == 4  # partial: cdiv(n, 256)


def replace_spec_free(doc: Document) -> Document:
    return Document(doc.text.replace("@cuda-agent", "(removed)"), doc.path)


def test_spec_for_prefers_the_written_spec(data_dir: Path) -> None:
    doc = load(data_dir, "vector_ops.cu")
    assert spec_for(doc, kernel(doc, "vadd")).source == "parsed"
    result = spec_for(doc, kernel(doc, "gather"))
    assert result.source == "inferred" and result.inference is not None
    # the inferred spec, rendered and inserted above the kernel, parses back cleanly
    g = kernel(doc, "gather")
    assert result.spec is not None
    inserted = doc.apply_change(g.span.start_line, 0, g.span.start_line, 0, render(result.spec))
    spec, errors = parse(kernel(inserted, "gather"))
    assert errors == () and spec is not None
    assert problems(spec) == problems(result.spec)


def test_the_guides_examples_parse_and_resolve() -> None:
    readme = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "specs.md").read_text(encoding="utf-8")
    blocks = [b.split("```", 1)[0] for b in readme.split("```cuda\n")[1:]]
    kernels = [k for block in blocks for k in Document(block).kernels]
    assert len(kernels) >= 4
    for k in kernels:
        spec, errors = parse(k)
        assert spec is not None and errors == (), (k.name, errors)
        assert problems(spec)


def test_inference_with_a_struct_parameter_is_low_confidence(data_dir: Path) -> None:
    doc = load(data_dir, "nvrtc_error.cu")
    inf = infer(doc, kernel(doc, "mean_kernel"))
    assert inf.confidence == "low"
    assert any("`Accum`" in r and "unknown" in r for r in inf.reasons)


def test_typedef_and_using_aliases_resolve() -> None:
    doc = Document(
        "typedef unsigned int u32;\nusing real = float;\ntypedef real real_t;\n"
        "// @cuda-agent sizes n=1000\n"
        "// @cuda-agent arg x in real_t[n]\n"
        "__global__ void k(const real* x, u32 n) {}\n"
        "__global__ void inferred(const real_t* x, real* y, u32 count) { y[0] = x[0]; }\n"
    )
    result = spec_for(doc, kernel(doc, "k"))
    assert result.errors == () and result.spec is not None
    assert [(a.name, a.dtype) for a in result.spec.args] == [("x", "float32"), ("n", "uint32")]
    inf = infer(doc, kernel(doc, "inferred"))
    assert inf.spec.sizes == {"count": "1<<24"}
    assert [(a.name, a.dtype) for a in inf.spec.args] == [
        ("x", "float32"),
        ("y", "float32"),
        ("count", "uint32"),
    ]
    assert parse(kernel(doc, "k"))[1]  # without the file's aliases `u32` is unknown


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("min(x)", "min takes 2 to 16 arguments"),
        ("max()", "max takes 2 to 16 arguments"),
        ("cdiv(1e999, 2)", "out of range"),
        ("cdiv(1, 1e-320)", "out of range"),
        ("9" * 400, "out of range"),
        ("pow(2, 100)", "out of range"),
        ("pow(10, 400.5)", "out of range"),
        ("exp(1000)", "out of range"),
        ("1e308 * 10", "not a finite number"),
        ("0 * 1e999", "not a finite number"),
        ("sqrt(-1)", "negative"),
        ("log(0)", "cannot be evaluated"),
        ("cdiv(x)", "cdiv takes 2 arguments"),
        ("min(x, y=2)", "min takes"),
        ("1 % 0", "divides by zero"),
        ("1.5 // 0.0", "divides by zero"),
        ("INFINITY", "not a finite number"),
    ],
)
def test_hostile_expressions_are_value_errors(expr: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        evaluate(expr, {"x": 3})


def test_math_functions_and_constants_in_expressions() -> None:
    assert evaluate("sqrt(n) + pow(2, 10)", {"n": 16}) == 1028
    assert evaluate("min(n, 8, 3)", {"n": 16}) == 3
    assert evaluate("-INFINITY", {}, finite=False) == -math.inf
    assert evaluate("INT_MAX", {}) == 2**31 - 1
    assert abs(evaluate("2 * M_PI", {}) - 6.283185307) < 1e-8


def test_hostile_specs_are_errors_at_their_lines(data_dir: Path) -> None:
    doc = load(data_dir, "hostile_specs.cu")
    lines = doc.text.splitlines()
    expected = {
        "one_arg_min": ("sizes n=min(4096)", "min takes 2 to 16 arguments"),
        "infinite_cdiv": ("cdiv(1e999, 2)", "out of range"),
        "subnormal_cdiv": ("cdiv(1, 1e-320)", "out of range"),
        "huge_integer": ("sizes n=1000000", "out of range"),
        "bad_tolerance": ("atol=1e999", "atol=1e999 must be a finite number >= 0"),
        "grid_too_big": ("grid=1<<31", "beyond the device's limits"),
        "grid_y_too_big": ("grid=(1, 65536)", "beyond the device's limits"),
        "smem_too_big": ("smem=1<<62", "227 KiB"),
    }
    for name, (needle, message) in expected.items():
        result = spec_for(doc, kernel(doc, name))
        assert result.source == "parsed"
        assert [e.line for e in result.errors] == [next(i for i, t in enumerate(lines) if needle in t)], name
        assert message in result.errors[0].message, name
    for good in ("good_first", "good_last"):
        result = spec_for(doc, kernel(doc, good))
        assert result.errors == () and result.spec is not None
        assert problems(result.spec)[-1].launch.grid == (4096, 1, 1)


def test_per_output_tolerances_norm_and_precision_allowance() -> None:
    text = (
        "// @cuda-agent sizes n=1024\n"
        "// @cuda-agent arg x in float[n]\n"
        "// @cuda-agent arg y out float[n]\n"
        "// @cuda-agent arg s out float[n]\n"
        "// @cuda-agent tolerance norm=1e-4\n"
        "// @cuda-agent tolerance arg=s rtol=1e-3\n"
        "// @cuda-agent precision allow=tf32,fast-math\n"
        "__global__ void k(const float* x, float* y, float* s, int n) { y[0] = x[0]; s[0] = x[0]; }\n"
    )
    spec = parsed(Document(text), "k")
    assert spec.tolerance is not None and spec.tolerance.norm == 1e-4 and not spec.tolerance.elementwise
    (s_tol,) = spec.output_tolerances
    assert (s_tol.arg, s_tol.rtol, s_tol.atol, s_tol.norm) == ("s", 1e-3, None, None)
    assert spec.allow_precision == ("tf32", "fast-math")
    again = parsed(Document(render(spec) + text.splitlines(keepends=True)[-1]), "k")
    assert (again.tolerance, again.output_tolerances, again.allow_precision) == (
        spec.tolerance,
        spec.output_tolerances,
        spec.allow_precision,
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("tolerance rtol=-1", "rtol=-1 must be a finite number >= 0"),
        ("tolerance atol=nan", "atol=nan must be a finite number >= 0"),
        ("launch grid=(1, 1, 65536) block=32", "beyond the device's limits"),
        ("launch grid=1 block=32 smem=-1", "smem=-1 must be"),
        ("launch grid=1 block=32 smem=227*1024+1", "227 KiB"),
    ],
)
def test_out_of_range_launch_and_tolerance(line: str, message: str) -> None:
    doc = Document(f"// @cuda-agent sizes n=64\n// @cuda-agent {line}\n__global__ void k(int n) {{}}\n")
    _, errors = parse(kernel(doc, "k"))
    assert [e.line for e in errors] == [1] and message in errors[0].message


def test_infinite_scalar_values_are_allowed_for_floats_only() -> None:
    doc = Document(
        "// @cuda-agent sizes n=64\n// @cuda-agent arg lo = -INFINITY\n// @cuda-agent arg m = INFINITY\n"
        "__global__ void k(float lo, int m, int n) {}\n"
    )
    spec, errors = parse(kernel(doc, "k"))
    assert [(e.line, "not a finite number" in e.message) for e in errors] == [(2, True)]
    doc = Document(
        "// @cuda-agent sizes n=64\n// @cuda-agent arg lo = -INFINITY\n__global__ void k(float lo, int n) {}\n"
    )
    spec, errors = parse(kernel(doc, "k"))
    assert errors == () and spec is not None
    assert problems(spec)[-1].args[0].value == -math.inf


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("tolerance arg=n rtol=1e-3", "scalar parameter"),
        ("tolerance arg=z rtol=1e-3", "no parameter `z`"),
        ("tolerance rtol=-1", "finite number >= 0"),
        ("tolerance arg=y", "give atol="),
        ("precision allow=fp8", "unknown precision `fp8`"),
        ("precision deny=tf32", "unknown key `deny`"),
    ],
)
def test_tolerance_and_precision_errors(line: str, message: str) -> None:
    text = (
        "// @cuda-agent sizes n=1024\n"
        "// @cuda-agent arg x in float[n]\n"
        "// @cuda-agent arg y out float[n]\n"
        f"// @cuda-agent {line}\n"
        "__global__ void k(const float* x, float* y, int n) { y[0] = x[0]; }\n"
    )
    _, errors = parse(kernel(Document(text), "k"))
    assert len(errors) == 1 and errors[0].line == 3 and message in errors[0].message


def test_at_cuda_agent_in_prose_is_not_a_directive() -> None:
    doc = Document(
        "// This kernel follows the @cuda-agent conventions of the team.\n"
        "// @cuda-agent sizes n=1024\n"
        "// @cuda-agent arg x out float[n]\n"
        "__global__ void k(float* x, int n) { x[threadIdx.x] = 1.0f; }\n"
    )
    spec, errors = parse(kernel(doc, "k"))
    assert spec is not None and not errors
    assert not misplaced(doc)


def test_misplaced_spec_blocks_name_their_kernel_and_the_separation() -> None:
    doc = Document(
        "// @cuda-agent sizes n=1024\n"
        "// @cuda-agent arg x out float[n]\n"
        "\n"
        "__global__ void a(float* x, int n) { x[0] = 1.0f; }\n"
        "// @cuda-agent sizes n=8\n"
        "/* a block comment */\n"
        "__global__ void b(float* x, int n) { x[0] = 1.0f; }\n"
        "// @cuda-agent sizes n=8\n"
    )
    found = [(m.first, m.last, m.kernel.name if m.kernel else None, m.reason) for m in misplaced(doc)]
    assert found == [
        (0, 1, "a", "separated from a by a blank line"),
        (4, 4, "b", "separated from b by `/* a block comment */`"),
        (7, 7, None, "no kernel follows it"),
    ]


def test_an_implied_size_argument_reports_errors_at_the_sizes_line() -> None:
    doc = Document(
        "\n\n// @cuda-agent sizes n=1<<20\n// @cuda-agent arg x out float[n]\n"
        "__global__ void k(float* x, short n) { x[0] = 1.0f; }\n"
    )
    spec, errors = parse(kernel(doc, "k"))
    assert spec is not None and not errors
    implied = next(a for a in spec.args if a.name == "n")
    assert implied.line == 2


def test_copy_distribution_and_its_mistakes() -> None:
    def spec_of(arg_lines: str) -> tuple[object, tuple[object, ...]]:
        doc = Document(
            f"// @cuda-agent sizes n=64\n{arg_lines}__global__ void k(float* acc, const float* x, int* m, int n) {{}}\n"
        )
        return parse(kernel(doc, "k"))

    spec, errors = spec_of(
        "// @cuda-agent arg acc inout float[n] copy(x)\n// @cuda-agent arg x in float[n]\n// @cuda-agent arg m in int[n]\n"
    )
    assert not errors and isinstance(spec, KernelSpec)
    acc = problems(spec)[-1].args[0]
    assert acc.dist == Distribution("copy", source="x")
    for lines, message in (
        ("// @cuda-agent arg acc inout float[n] copy(y)\n", "copy(y): no array argument"),
        ("// @cuda-agent arg acc out float[n] copy(x)\n", "needs an in or inout"),
        ("// @cuda-agent arg acc inout float[2*n] copy(x)\n", "float32[64] is not float32[128]"),
    ):
        _, errors = spec_of(lines + "// @cuda-agent arg x in float[n]\n// @cuda-agent arg m in int[n]\n")
        assert any(message in e.message and e.line == 1 for e in errors), errors  # type: ignore[attr-defined]


def test_require_constrains_verify_sizes_blocks_and_memory() -> None:
    doc = Document(
        "// @cuda-agent sizes m=1000 n=4096\n"
        "// @cuda-agent launch grid=(cdiv(n, block_x), cdiv(m, block_y)) block=(32, 8)\n"
        "// @cuda-agent arg a in float[m*n]\n"
        "// @cuda-agent require n % 64 == 0 && m % 8 == 0\n"
        "// @cuda-agent require pow2(block_x * block_y) and bytes <= 1 << 26\n"
        "__global__ void k(const float* a, int m, int n) {}\n"
    )
    spec, errors = parse(kernel(doc, "k"))
    assert spec is not None and not errors
    assert verify_sizes(spec) == ({"m": 64, "n": 64}, {"m": 960, "n": 960})  # every cap lowered until met
    with pytest.raises(InvalidSpec, match=r"line 5: require .*pow2.*not met"):
        problem(spec, {"m": 8, "n": 64}, block=(24, 8))
    with pytest.raises(InvalidSpec, match=r"bytes=67239936\)"):
        problem(spec, {"m": 4104, "n": 4096})  # a memory cap: just over 64 MiB
    assert "// @cuda-agent require n % 64 == 0 and m % 8 == 0\n" in render(spec)
    lines = tuple((i, line.removeprefix("//")) for i, line in enumerate(render(spec).splitlines()))
    again, errors = parse(replace(kernel(doc, "k"), comment=lines))
    assert not errors and again is not None
    assert [c for c, _ in again.requires] == [c for c, _ in spec.requires]


def test_the_worker_starts_a_copy_argument_with_its_source_data(data_dir: Path) -> None:
    from sandbox.draws import inputs_for

    doc = load(data_dir, "spec_grammar/accumulate_copy.cu")
    spec, errors = parse(kernel(doc, "accumulate"))
    assert spec is not None and not errors
    data = inputs_for(problems(spec)[0], seed=3)
    assert data["acc"].tobytes() == data["x"].tobytes() and data["acc"] is not data["x"]
    assert data["x"].std() > 0.1  # real data, not zeros


def test_a_null_pointer_argument_is_a_64_bit_zero(data_dir: Path) -> None:
    doc = load(data_dir, "spec_grammar/layernorm_optional.cu")
    spec, errors = parse(kernel(doc, "row_stats"))
    assert spec is not None and not errors
    rstd = next(a for a in problems(spec)[-1].args if a.name == "rstd")
    assert (rstd.role, rstd.dtype, rstd.value) == ("scalar", "uint64", 0.0)
    assert "// @cuda-agent arg rstd = NULL\n" in render(spec)
    bad = Document(
        "// @cuda-agent sizes n=8\n// @cuda-agent arg x = 3\n__global__ void k(float* x, int n) {}\n"
    )
    _, errors = parse(kernel(bad, "k"))
    assert any("is a pointer" in e.message and "= NULL" in e.message for e in errors)


def test_a_worker_accepts_a_copy_argument_and_refuses_a_bad_one(data_dir: Path) -> None:
    from sandbox.contract import EvalRequest, KernelSource, RequestError, validate_request

    doc = load(data_dir, "spec_grammar/accumulate_copy.cu")
    spec, _ = parse(kernel(doc, "accumulate"))
    assert spec is not None
    probs = problems(spec)
    request = EvalRequest(
        "copy", KernelSource("__global__ void accumulate() {}", "accumulate"), (), probs[:-1], probs[-1]
    )
    validate_request(request)
    acc = probs[-1].args[0]
    bad = replace(probs[-1], args=(replace(acc, dist=replace(acc.dist, source="acc")), *probs[-1].args[1:]))
    with pytest.raises(RequestError, match=r"dist\.source"):
        validate_request(replace(request, bench_problem=bad))


def test_work_floor_off_declares_that_the_counts_overstate_the_traffic() -> None:
    def spec_with(work: str) -> KernelSpec:
        doc = Document(
            "// @cuda-agent sizes n=4096\n"
            "// @cuda-agent arg a in float[n]\n"
            f"// @cuda-agent work {work}\n"
            "__global__ void k(const float* a, int n) {}\n"
        )
        spec, errors = parse(kernel(doc, "k"))
        assert spec is not None and not errors, errors
        return spec

    on, off = spec_with("bytes=8*n"), spec_with("bytes=8*n floor=off")
    assert problems(on)[-1].work_floor and not problems(off)[-1].work_floor
    assert problems(off)[-1].bytes_moved == 8 * 4096
    assert "work bytes=8*n floor=off\n" in render(off) and "floor" not in render(on)
    doc = Document(
        "// @cuda-agent sizes n=64\n// @cuda-agent work floor=maybe\n__global__ void k(int n) {}\n"
    )
    _, errors = parse(kernel(doc, "k"))
    assert any("floor=off" in e.message for e in errors), errors


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("launch grid=cdiv(n, block) block=(256", "launch grid=cdiv(n, block) block=128"),
        ("launch block=64", "launch block=128"),
        ("work bytes=8*n", "work bytes=4*n"),
        ("precision allow=tf32", "precision allow=fp16"),
    ],
)
def test_a_second_line_of_a_once_only_directive_is_an_error_never_the_winner(first: str, second: str) -> None:
    doc = Document(
        "// @cuda-agent sizes n=1<<20\n"
        f"// @cuda-agent {first}\n"
        f"// @cuda-agent {second}\n"
        "// @cuda-agent arg x in float[n]\n"
        "// @cuda-agent arg y out float[n]\n"
        "__global__ void k(const float* x, float* y, int n) { }\n"
    )
    _, errors = parse(kernel(doc, "k"))
    keyword = second.split()[0]
    assert any(
        e.line == 2 and f"a second `{keyword}` line (the first is line 2)" in e.message for e in errors
    ), errors


def test_a_rewrites_own_launch_lines_are_no_spec_and_no_error(data_dir: Path) -> None:
    doc = load(data_dir, "compare/softmax_pair.cu")
    assert parse(kernel(doc, "softmax_rows")) == (None, ())  # what `compare` reads from a rewrite
    bad = Document("// @cuda-agent launch grid=rows blok=256\n__global__ void k(float* y, int rows) { }\n")
    spec, errors = parse(kernel(bad, "k"))  # a mistake in them is still one
    assert spec is None and [e.line for e in errors] == [0] and "unknown key `blok`" in errors[0].message


_ORDER = """
import sys
from cudasrc.source import Document
from cudasrc.specs import parse
doc = Document("// @cuda-agent work bytes=1\\n__global__ void k(float* a, float* b, int c, float* d, int e) { }\\n")
print([e.message for e in parse(doc.kernels[0])[1]])
"""


def test_spec_errors_come_in_the_same_order_on_every_run() -> None:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    runs = {
        subprocess.run(
            [sys.executable, "-c", _ORDER],
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(root)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2", "3", "4", "5")
    }
    assert len(runs) == 1, runs
    assert "no `sizes` line" in runs.pop()
