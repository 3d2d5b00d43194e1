"""Spec inference across multi-file projects (tests/data/projects/): a kernel in a header
launched from a program in another folder, from a function pointer, from a template launcher,
through defaults, macros and helpers, or from Python through a PyTorch extension; each field
falls back on its own; every kernel compiles standalone with the project's headers found."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import spec_scores

from agent.check import check_kernel
from agent.target import target_for
from cudasrc.project import project_of, resolve_include
from cudasrc.source import Document
from cudasrc.specs import bench_sizes, infer, problem, render_inference, verify_sizes
from sandbox.compiler import CompilerUnavailable
from server.hover import inferred_markdown

PROJECTS = Path(__file__).parent / "data" / "projects"


def _infer(relative: str, kernel: str):  # type: ignore[no-untyped-def]
    doc = Document.from_file(PROJECTS / relative)
    k = doc.kernel(kernel)
    assert k is not None
    return infer(doc, k)


def _resolved(inference) -> dict[str, object]:  # type: ignore[no-untyped-def]
    """The benchmark problem: each argument's value or count, the launch."""
    p = problem(inference.spec, bench_sizes(inference.spec))
    out: dict[str, object] = {"grid": p.launch.grid, "block": p.launch.block, "smem": p.launch.shared_bytes}
    for a in p.args:
        out[a.name] = a.value if a.role == "scalar" else (a.role, a.dtype, a.count)
    return out


def test_every_expected_field_is_inferred() -> None:
    scores, missing = spec_scores.measure(PROJECTS)
    assert not missing
    assert {s.kernel for s in scores} >= {
        "scale_rows", "axpy", "count_positive", "block_sum", "scale_partial", "transpose_tiled",
        "softmax_rows", "adam_step", "gelu_fwd", "row_sum", "vector_add",
    }  # fmt: skip
    for s in scores:
        assert s.matched == s.fields, (s.kernel, s.mismatches)
        assert s.confidence == "high", s.kernel


def test_header_kernel_gets_its_launch_from_a_cpp_main_in_another_folder() -> None:
    inf = _infer("rowscale/inc/rowscale.cuh", "scale_rows")
    where = {e.field: e.where for e in inf.evidence}
    # static const / constexpr sizes, dim3 members through CEIL_DIV, reinterpret_cast allocations
    assert inf.spec.sizes == {"rows": "512", "cols": "1000"}
    # from another folder: the path, never a bare file name
    assert where["grid"] == where["block"] and where["grid"].endswith("rowscale/src/main.cpp:15")
    assert _resolved(inf) == {
        "grid": (32, 64, 1), "block": (32, 8, 1), "smem": 0,
        "out": ("out", "float32", 512000), "in": ("in", "float32", 512000), "bias": ("in", "float32", 1000),
        "rows": 512, "cols": 1000, "alpha": 0.5,
    }  # fmt: skip
    assert where["arg in"].endswith("rowscale/src/main.cpp:10")


def test_function_pointer_launches_and_atomic_targets() -> None:
    axpy = _infer("fnptr/kernels/ops.cuh", "axpy")
    assert _resolved(axpy)["grid"] == (8192, 1, 1) and axpy.spec.block == ("128",)
    assert _resolved(axpy)["a"] == 3.0
    count = _infer("fnptr/kernels/ops.cuh", "count_positive")
    arg = next(a for a in count.spec.args if a.name == "count")
    assert (arg.role, arg.count, arg.dist.kind, arg.dist.args) == ("inout", "1", "const", ("0",))


def test_template_launcher_binds_its_template_argument() -> None:
    inf = _infer("tmpl_launcher/include/block_sum.cuh", "block_sum")
    assert inf.spec.template_args == ("128",)
    # smem = BLOCK <= 32 ? 2*BLOCK*4 : BLOCK*4 with BLOCK=128
    resolved = _resolved(inf)
    assert (resolved["grid"], resolved["block"], resolved["smem"]) == ((2048, 1, 1), (128, 1, 1), 512)
    assert resolved["partial"] == ("out", "float32", 2048)


def test_helpers_run_to_the_end_and_verification_sizes_keep_the_launch_valid() -> None:
    inf = _infer("macro_dim3/cuda/attention_rows.cu", "softmax_rows")
    assert inf.spec.block == ("128",)  # largestPow2(ROWS_PER_BLOCK + 10): its loop ran to the end
    assert inf.spec.sizes == {"T": "1024"}
    # grid T/128 launches T/128 blocks: the program assumes T % 128 == 0, and 97 would make it 0;
    # the verification sizes are the program's T halved until the launch is valid (all rows written)
    assert inf.spec.requires == (("T % block == 0", -1),)
    assert verify_sizes(inf.spec) == ({"T": 128}, {"T": 512})
    for sizes in verify_sizes(inf.spec):
        assert problem(inf.spec, sizes).launch.grid[0] * 128 == sizes["T"]


def test_default_arguments_are_applied() -> None:
    inf = _infer("defaults/include/adam.cuh", "adam_step")
    r = _resolved(inf)
    assert r["lr"] == pytest.approx(3e-4) and r["beta1"] == pytest.approx(0.9)
    assert r["eps"] == pytest.approx(1e-8) and r["block"] == (512, 1, 1)
    assert "n" not in inf.spec.sizes  # the size keeps the program's name, never the parameter's
    assert bench_sizes(inf.spec) == {"num_params": 3 * 1024 * 1024}


def test_torch_extension_kernel_gets_its_sizes_from_the_python_caller() -> None:
    gelu = _infer("torch_ext/csrc/gelu.cu", "gelu_fwd")
    assert gelu.spec.sizes == {"BATCH": "4096", "HIDDEN": "768"}
    assert any(e.where.endswith("torch_ext/train.py:6") for e in gelu.evidence)
    rows = _infer("torch_ext/csrc/gelu.cu", "row_sum")
    r = _resolved(rows)
    assert (r["grid"], r["block"], r["smem"], r["rows"], r["cols"]) == (
        (4096, 1, 1),
        (128, 1, 1),
        512,
        4096,
        768,
    )


def test_kernel_tuner_script_gives_the_launch_and_the_defines() -> None:
    inf = _infer("kernel_tuner/vector_add.cu", "vector_add")
    # tune_params["block_size_x"] = [128, ...]; grid_div_x=["block_size_x", "tile_size_x"]
    assert inf.spec.block == ("128",) and inf.spec.grid == ("cdiv(size, block * 2)",)
    assert inf.spec.defines == {"block_size_x": "block", "tile_size_x": "2"}
    assert inf.spec.sizes == {"size": "10000000"}
    p = problem(inf.spec, bench_sizes(inf.spec), block=256)  # a tuner's block follows into the macro
    assert p.defines["block_size_x"] == 256 and p.launch.grid == (19532, 1, 1)


def test_each_field_falls_back_on_its_own() -> None:
    inf = _infer("opaque_launch/kernels/shift.cuh", "shift_scale")
    by_field = {e.field: e for e in inf.evidence}
    # grid and smem come from a library: guessed, and said so
    assert by_field["grid"].confidence == "low" and by_field["smem"].confidence == "low"
    # the shared memory guess: one element per thread of its `extern __shared__ float stage[]`
    assert inf.spec.grid == ("cdiv(n, block)",) and inf.spec.smem == "block*4"
    assert "grid" in inf.guesses() and "smem" in inf.guesses()
    # everything the program does say is kept, at its own confidence
    assert by_field["block"].confidence == "high" and inf.spec.block == ("128",)
    assert inf.spec.sizes == {"n": "100000"} and by_field["size n"].confidence == "high"
    r = _resolved(inf)
    assert (r["scale"], r["out"], r["in"]) == (2.5, ("out", "float32", 100000), ("in", "float32", 100000))
    assert inf.confidence == "low"


def test_hover_and_snippet_say_which_fields_are_guessed() -> None:
    inf = _infer("opaque_launch/kernels/shift.cuh", "shift_scale")
    hover = inferred_markdown(inf)
    assert "low confidence" in hover
    assert "- grid: grid unknown at the launch: cdiv(n, block) assumed" in hover
    assert "- block" not in hover  # read from the program: not listed as a guess
    snippet = render_inference(inf).splitlines()
    launch = next(i for i, line in enumerate(snippet) if "@cuda-agent launch" in line)
    assert (
        snippet[launch - 1].startswith("// guess: grid unknown") and "block*4 assumed" in snippet[launch - 1]
    )


def test_project_root_and_include_folders() -> None:
    rowscale = project_of(PROJECTS / "rowscale" / "inc" / "rowscale.cuh")
    assert rowscale.root == (PROJECTS / "rowscale").resolve()
    assert rowscale.include_dirs == ((PROJECTS / "rowscale" / "inc").resolve(),)  # compile_commands.json
    main = PROJECTS / "rowscale" / "src" / "main.cpp"
    assert resolve_include(main, "rowscale.cuh") == (PROJECTS / "rowscale" / "inc" / "rowscale.cuh").resolve()
    assert resolve_include(main, "missing.h") is None
    tree = project_of(PROJECTS / "tmpl_launcher" / "src" / "launch.cu")  # no compile_commands: the tree
    assert (PROJECTS / "tmpl_launcher" / "include").resolve() in tree.include_dirs


def test_a_fifo_in_the_project_is_no_source_and_blocks_nothing(tmp_path: Path) -> None:
    """A named pipe beside the kernel (another test's, a tool's) is never opened: reading one waits
    for a writer forever."""
    (tmp_path / "Makefile").write_text("")
    (tmp_path / "src").mkdir()
    kernel = tmp_path / "src" / "k.cu"
    kernel.write_text("__global__ void k(float* x, int n) { x[threadIdx.x] = 1.0f; }\n")
    os.mkfifo(tmp_path / "src" / "main.cu")
    project = project_of(kernel)
    assert project.root == tmp_path and project.sources == (kernel,)
    doc = Document.from_file(kernel)
    k = doc.kernel("k")
    assert k is not None and infer(doc, k).spec.block  # a guess, without waiting on the pipe


def test_standalone_unit_drops_host_headers_reached_through_project_headers() -> None:
    doc = Document.from_file(PROJECTS / "rowscale" / "inc" / "rowscale.cuh")
    k = doc.kernel("scale_rows")
    assert k is not None
    unit = doc.standalone(k)
    assert "cublas" not in unit.source and 'extern "C"' not in unit.source
    assert "CEIL_DIV" not in unit.source or "#define CEIL_DIV" in unit.source
    launch = Document.from_file(PROJECTS / "tmpl_launcher" / "src" / "launch.cu")
    scale = launch.kernel("scale_partial")
    assert scale is not None
    options = launch.standalone(scale).options
    assert f"-I{(PROJECTS / 'tmpl_launcher' / 'include').resolve()}" in options


KERNEL_FILES = sorted(
    (str(p.relative_to(PROJECTS)), k.name)
    for p in PROJECTS.rglob("*")
    if p.suffix in (".cu", ".cuh", ".h", ".cpp")
    for k in Document.from_file(p).kernels
)


@pytest.mark.parametrize(("relative", "name"), KERNEL_FILES)
def test_the_inferred_spec_of_every_fixture_kernel_resolves(relative: str, name: str) -> None:
    doc = Document.from_file(PROJECTS / relative)
    k = doc.kernel(name)
    assert k is not None
    text = render_inference(infer(doc, k))
    lines = doc.text.splitlines(keepends=True)
    written = Document(
        "".join(lines[: k.span.start_line]) + text + "".join(lines[k.span.start_line :]), doc.path
    )
    target = target_for(written, name)  # the snippet as the editor inserts it parses back and resolves
    assert target.verify_problems and all(min(p.launch.grid) >= 1 for p in target.verify_problems)
    bench = target.bench_problem
    assert all(p.sizes != bench.sizes for p in target.verify_problems)  # smaller than the program's


@pytest.mark.parametrize(("relative", "name"), KERNEL_FILES)
def test_check_compiles_every_fixture_kernel_standalone(relative: str, name: str) -> None:
    doc = Document.from_file(PROJECTS / relative)
    k = doc.kernel(name)
    assert k is not None
    try:
        result = check_kernel(doc, k)
    except CompilerUnavailable as exc:
        pytest.skip(f"NVRTC unavailable: {exc}")
    assert result.ok, [d.message for d in result.diagnostics]
    assert not k.template_params or result.name_expression  # instantiated as the project launches it


def test_a_long_helper_loop_falls_back_to_one_iteration_and_keeps_the_launch(tmp_path: Path) -> None:
    program = tmp_path / "busy.cu"
    program.write_text(
        "__global__ void fill(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] = 1.0f; }\n"
        "int work(int n) { int s = 0; for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) s += 1;"
        " return 64; }\n"
        "int pow2(int n) { int p = 1; while (p * 2 <= n) p *= 2; return p; }\n"
        "int main() {\n"
        "  int n = 5000;\n"
        "  float* x; cudaMalloc(&x, n * sizeof(float));\n"
        "  int t = work(n) + pow2(100);\n"
        "  fill<<<(n + t - 1) / t, t>>>(x, n);\n"
        "}\n"
    )
    doc = Document.from_file(program)
    k = doc.kernel("fill")
    assert k is not None
    inf = infer(doc, k)
    assert inf.spec.block == ("128",)  # 64 + pow2(100) = 64 + 64: both helpers returned
    assert inf.spec.sizes == {"n": "5000"}


def test_unusable_build_files_and_scripts_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "include").mkdir()
    (tmp_path / "include" / "k.cuh").write_text(
        "__global__ void scale(float* x, long n) { long i = threadIdx.x; if (i < n) x[i] *= 2.0f; }\n"
    )
    (tmp_path / "compile_commands.json").write_text("{not json")  # unusable: the tree's folders instead
    (tmp_path / "broken.py").write_text("def f(:\n  ext.scale(\n")
    (tmp_path / "ext.cu").write_text(
        '#include "k.cuh"\n#include <torch/extension.h>\n'
        "torch::Tensor run(torch::Tensor x) {\n"
        "  scale<<<1, 256>>>(x.data_ptr<float>(), x.numel());\n  return x;\n}\n"
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("scale", &run); }\n'
    )
    (tmp_path / "use.py").write_text("import torch\nN = 4096\nout = ext.scale(torch.zeros(N, 3))\n")
    project = project_of(tmp_path / "include" / "k.cuh")
    assert project.root == tmp_path.resolve()
    assert (tmp_path / "include").resolve() in project.include_dirs
    doc = Document.from_file(tmp_path / "include" / "k.cuh")
    k = doc.kernel("scale")
    assert k is not None
    inf = infer(doc, k)
    assert bench_sizes(inf.spec) == {"N": 4096, "x_1": 3}
    assert next(a for a in inf.spec.args if a.name == "x").count == "N * x_1"


def test_a_tensor_of_unknown_shape_leaves_only_its_fields_to_guess(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "ext.cu").write_text(
        "#include <torch/extension.h>\n"
        "__global__ void add1(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }\n"
        "torch::Tensor run(torch::Tensor x) {\n"
        "  add1<<<(x.numel() + 127) / 128, 128>>>(x.data_ptr<float>(), x.numel());\n  return x;\n}\n"
    )
    doc = Document.from_file(tmp_path / "ext.cu")
    k = doc.kernel("add1")
    assert k is not None
    inf = infer(doc, k)  # nobody calls `run` from Python: the sizes are unknown, the block is not
    assert inf.spec.block == ("128",)
    assert {e.field: e.confidence for e in inf.evidence}["block"] == "high"
    assert inf.confidence == "low"


def test_a_parameter_named_like_a_host_function_does_not_pull_it_in() -> None:
    doc = Document(
        "#include <vector>\n"
        "constexpr int tile() { return 16; }\n"
        "int rows(int n) { std::vector<int> v(n); return (int)v.size(); }\n"
        "__global__ void k(float* x, int rows) { __shared__ float t[tile()]; t[threadIdx.x] = x[rows]; x[0] = t[0]; }\n",
        "names.cu",
    )
    k = doc.kernel("k")
    assert k is not None
    unit = doc.standalone(k).source
    assert "constexpr int tile()" in unit  # a constexpr function serves device code
    assert "int rows(int n)" not in unit and "vector" not in unit


def test_a_launch_that_does_not_resolve_falls_back_on_the_failing_field_only(tmp_path: Path) -> None:
    program = tmp_path / "big_smem.cu"
    program.write_text(
        "__global__ void twice(float* x, int n) {\n"
        "  extern __shared__ float s[]; int i = threadIdx.x; s[i] = x[i]; if (i < n) x[i] = 2.0f * s[i];\n"
        "}\n"
        "int main() {\n  int n = 1 << 20;\n  float* x; cudaMalloc(&x, n * sizeof(float));\n"
        "  twice<<<(n + 255) / 256, 256, n * sizeof(float)>>>(x, n);\n}\n"
    )
    doc = Document.from_file(program)
    k = doc.kernel("twice")
    assert k is not None
    inf = infer(doc, k)
    by_field = {e.field: e for e in inf.evidence}
    assert inf.spec.smem == "block*4" and by_field["smem"].confidence == "low"
    assert "smem=4194304" in by_field["smem"].note  # 4 MiB of shared memory: not valid as read
    assert by_field["grid"].confidence == "high" and _resolved(inf)["grid"] == (4096, 1, 1)


def test_sizes_and_scalars_the_launch_site_gives_are_never_guessed_by_name() -> None:
    # a launch the host interpreter does not enter (a method): the launch site's text is read
    doc = Document(
        "__global__ void sgemm(int M, int N, int K, float alpha, const float* A, const float* B, float* C) {\n"
        "  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (r < M && c < N) { float s = 0; for (int k = 0; k < K; k++) s += A[r * K + k] * B[k * N + c];"
        " C[r * N + c] = alpha * s; }\n"
        "}\n"
        "struct Runner {\n"
        "  void go(const float* A, const float* B, float* C) {\n"
        "    sgemm<<<dim3(64, 64), dim3(16, 16)>>>(1024, 1024, 512, 0.5f, A, B, C);\n"
        "  }\n"
        "};\n",
        "runner.cu",
    )
    k = doc.kernel("sgemm")
    assert k is not None
    inf = infer(doc, k)
    assert bench_sizes(inf.spec) == {"M": 1024, "N": 1024, "K": 512}  # not M = K = 1 for their names
    assert _resolved(inf)["alpha"] == 0.5  # not 1.5
    assert inf.guesses()["arg alpha"] == "read from the launch site's text"


def test_a_launcher_nobody_calls_guesses_its_sizes_alone() -> None:
    # run(…, int n) is not called with a value: n is a guessed size, the block is still read
    doc = Document(
        "__global__ void scale(float* v, float s, int n) { int i = threadIdx.x; if (i < n) v[i] *= s; }\n"
        "void run(float* v, int n) { scale<<<(n + 99) / 100, 100>>>(v, 0.5f, n); }\n",
        "launcher.cu",
    )
    k = doc.kernel("scale")
    assert k is not None
    inf = infer(doc, k)
    by_field = {e.field: e for e in inf.evidence}
    assert inf.spec.sizes == {"n": "1<<24"} and by_field["size n"].confidence == "low"
    assert inf.spec.block == ("100",) and by_field["block"].confidence == "high"
    assert _resolved(inf)["s"] == 0.5 and by_field["arg s"].confidence == "high"
    assert _resolved(inf)["grid"] == (167773, 1, 1)  # cdiv(n, block): guessed, and said so
    assert by_field["grid"].confidence == "low"


def test_extern_c_host_declarations_of_a_project_header_stay_out(tmp_path: Path) -> None:
    (tmp_path / "api.h").write_text(
        "#pragma once\n#define SCALE 2.0f\n"
        'extern "C" void launch_scale(cublasHandle_t h, float* x, int n);\n'
        'extern "C" {\nvoid other(cudaStream_t s);\n}\n'
        'extern "C" __global__ void kept(float* x) { x[0] = SCALE; }\n'
    )
    (tmp_path / "k.cu").write_text(
        '#include "api.h"\n__global__ void k(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] *= SCALE; }\n'
    )
    doc = Document.from_file(tmp_path / "k.cu")
    k = doc.kernel("k")
    assert k is not None
    unit = doc.standalone(k).source
    assert "#define SCALE 2.0f" in unit and "launch_scale" not in unit and "other" not in unit
    header = Document.from_file(tmp_path / "api.h")
    kept = header.kernel("kept")
    assert kept is not None and 'extern "C" __global__ void kept' in header.standalone(kept).source
    try:
        assert check_kernel(doc, k).ok
    except CompilerUnavailable as exc:
        pytest.skip(f"NVRTC unavailable: {exc}")


KERNEL = """__global__ void scale(float* y, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 2.0f * x[i];
}
"""
OTHER = """__global__ void scale(int n, float a, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
int main() {
    int n = 5000; float* y; cudaMalloc(&y, n * sizeof(float));
    scale<<<(n + 99) / 100, 100>>>(n, 3.0f, y);
}
"""
LAUNCHER = """#include "k.cu"
int main() {
    int n = 4096; float *x, *y;
    cudaMalloc(&x, n * sizeof(float)); cudaMalloc(&y, n * sizeof(float));
    scale<<<(n + 127) / 128, 128>>>(y, x, n);
}
"""


def test_a_loose_file_never_takes_a_launch_from_a_sibling_folder(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "k.cu").write_text(KERNEL)
    (tmp_path / "b" / "main.cu").write_text(OTHER)  # another program's kernel of the same name
    doc = Document.from_file(tmp_path / "a" / "k.cu")
    inf = infer(doc, doc.kernels[0])
    assert inf.spec.block == ("256",) and not any("main.cu" in e.where for e in inf.evidence)
    assert inf.confidence != "high"


def test_a_launch_in_the_loose_files_own_folder_is_cited_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(KERNEL)
    (tmp_path / "main.cu").write_text(LAUNCHER)
    (tmp_path / "a_other.cu").write_text(OTHER)  # read first; defines its own `scale`: not ours
    doc = Document.from_file(tmp_path / "k.cu")
    inf = infer(doc, doc.kernels[0])
    where = {e.field: e.where for e in inf.evidence}
    assert inf.spec.block == ("128",) and inf.spec.sizes == {"n": "4096"}
    assert where["block"] == f"{(tmp_path / 'main.cu').resolve()}:5"  # outside the working folder: absolute
