"""Per-kernel NVRTC checks (no GPU needed) and the `kernels` / `check` subcommands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.check import CompileCommandsError, check_document, compile_commands_options
from cudasrc.source import Document
from server.cli.main import main


def line_of(path: Path, needle: str) -> int:
    """1-based line of the first line containing ``needle``."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_error_is_reported_at_the_line_of_the_original_file(data_dir: Path) -> None:
    path = data_dir / "nvrtc_error.cu"
    result = check_document(Document.from_file(path))
    by_name = {k.kernel: k for k in result.kernels}
    assert not result.ok
    typo = by_name["typo_kernel"]
    assert not typo.ok and typo.resources is None
    (error,) = [d for d in typo.diagnostics if d.severity == "error"]
    assert (error.file, error.line) == (str(path), line_of(path, "ERROR-HERE"))
    assert "scale_factr" in error.message
    assert error.column == path.read_text().splitlines()[error.line - 1].index("scale_factr") + 1
    mean = by_name["mean_kernel"]
    assert mean.ok and mean.resources is not None and mean.resources.registers > 0
    assert any("macro" in i.message for i in result.issues)


def test_template_kernel_compiles_as_its_spec_instantiates_it(data_dir: Path) -> None:
    result = check_document(Document.from_file(data_dir / "reduce.cu"))
    assert result.ok, result.diagnostics
    block_sum = next(k for k in result.kernels if k.kernel == "block_sum")
    assert block_sum.name_expression == "block_sum<float, 256>"
    assert block_sum.resources is not None
    assert block_sum.resources.shared_bytes == 256 // 32 * 4  # warp_sums[BLOCK / WARP_SIZE] floats


def test_uninstantiated_template_is_syntax_checked_with_a_note() -> None:
    doc = Document("template <typename T>\n__global__ void fill(T* x, T v) { x[threadIdx.x] = v; }\n")
    (k,) = check_document(doc).kernels
    assert k.ok and k.name_expression == "" and k.resources is None and "uninstantiated" in k.note


def test_every_fixture_kernel_compiles_standalone(data_dir: Path) -> None:
    for name in ("vector_ops.cu", "reduce.cu", "host_infer.cu", "broken_midedit.cu"):
        result = check_document(Document.from_file(data_dir / name))
        assert result.kernels and result.ok, (name, result.diagnostics)
        assert all(k.resources is not None for k in result.kernels)


HEADER_USER = """#include "scale.cuh"
__global__ void scaled(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= SCALE * kFactor;
}
"""


def test_include_paths_and_defines_from_compile_commands(tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "scale.cuh").write_text("constexpr float kFactor = 0.5f;\n")
    src = tmp_path / "src" / "scaled.cu"
    src.parent.mkdir()
    src.write_text(HEADER_USER)
    doc = Document.from_file(src)
    assert not check_document(doc).ok  # neither the header nor SCALE is known
    db = tmp_path / "compile_commands.json"
    db.write_text(
        json.dumps(
            [
                {"directory": str(tmp_path), "file": "other.cu", "arguments": ["nvcc", "-DSCALE=1"]},
                {
                    "directory": str(tmp_path),
                    "file": "src/scaled.cu",
                    "command": "nvcc -O3 -I inc -DSCALE=2.0f -std=c++17 -c src/scaled.cu -o scaled.o",
                },
            ]
        )
    )
    options = compile_commands_options(db, src)
    assert options == (f"-I{(tmp_path / 'inc').resolve()}", "-DSCALE=2.0f", "-std=c++17")
    assert check_document(doc, options=options).ok
    with pytest.raises(CompileCommandsError, match="no entry"):
        compile_commands_options(db, tmp_path / "missing.cu")


# ------------------------------------------------------------------------------------- CLI


def test_cli_check_json_and_exit_status(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = data_dir / "nvrtc_error.cu"
    assert main(["check", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False
    errors = [d for k in out["kernels"] for d in k["diagnostics"] if d["severity"] == "error"]
    assert [e["line"] for e in errors] == [line_of(path, "ERROR-HERE")]
    assert main(["check", str(data_dir / "reduce.cu")]) == 0
    text = capsys.readouterr().out
    assert "block_sum<float, 256>" in text and "32 bytes smem" in text


def test_cli_check_human_output_names_file_and_line(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = data_dir / "nvrtc_error.cu"
    assert main(["check", str(path), "-D", "UNUSED=1", "-I", str(data_dir)]) == 1
    captured = capsys.readouterr()
    assert f"{path}:{line_of(path, 'ERROR-HERE')}:" in captured.out
    assert "FAIL typo_kernel" in captured.out
    assert "1 kernel(s) failed to compile" in captured.err


def test_cli_check_bad_compile_commands_is_a_user_error(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "compile_commands.json"
    bad.write_text("{not json")
    assert main(["check", str(data_dir / "vector_ops.cu"), "--compile-commands", str(bad)]) == 2
    assert "cannot read compile commands" in capsys.readouterr().err


def test_cli_kernels_json(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kernels", str(data_dir / "vector_ops.cu"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    kernels = {k["kernel"]["name"]: k for k in out["kernels"]}
    assert list(kernels) == ["vadd", "saxpy4", "poly_eval", "gather"]
    assert kernels["vadd"]["spec"]["source"] == "parsed"
    assert [len(s["args"]) for s in kernels["vadd"]["launches"]] == [4, 4]
    assert kernels["gather"]["spec"]["source"] == "inferred"
    assert kernels["gather"]["spec"]["confidence"] in ("high", "medium", "low")
    assert kernels["gather"]["spec"]["text"].startswith("// @cuda-agent sizes")
    assert (
        kernels["vadd"]["kernel"]["name_span"]["start_line"]
        == line_of(data_dir / "vector_ops.cu", "void vadd(") - 1
    )


def test_cli_kernels_human_lists_spec_errors_and_issues(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = data_dir / "spec_errors.cu"
    assert main(["kernels", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"spec error, line {line_of(path, 'floot')}: arg: unknown element type `floot`" in out
    broken = data_dir / "broken_midedit.cu"
    assert main(["kernels", str(broken)]) == 0
    out = capsys.readouterr().out
    assert f"{broken}:{line_of(broken, 'half_typed')}: error: a __global__ kernel here does not parse" in out
    assert "square(" in out


def test_specialisations_aliases_and_preprocessor_blocks_compile(data_dir: Path) -> None:
    doc = Document.from_file(data_dir / "specialized.cu")
    combine, transpose = doc.kernels
    unit = doc.standalone(combine).source
    for needed in (
        "typedef unsigned int u32;",
        "using real = float;",
        "enum class Mode",
        "apply<Mode::Mul>",
        "#define FMA",
        "__device__ u32 g_counter;",
        "struct alignas(16) Vec4",
    ):
        assert needed in unit, needed
    assert "tiled_transpose" not in unit and "int main" not in unit
    t_unit = doc.standalone(transpose).source
    assert "constexpr int kTile = 32;" in t_unit and "g_counter" not in t_unit and "apply" not in t_unit
    result = check_document(doc)
    assert result.ok, result.diagnostics
    assert [k.name_expression for k in result.kernels] == ["combine<Mode::Add>", "tiled_transpose"]
    t = result.kernels[1].resources
    assert t is not None and t.shared_bytes == 32 * 33 * 2  # __half tile[kTile][kTile + 1]


GLIBC_NAMES = """__global__ void hist(const uint* keys, uint* bins, ushort shift, ulong n) {
    ulong i = blockIdx.x * (ulong)blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[keys[i] >> shift], 1u);
}
"""


@pytest.mark.parametrize("own", ["", "typedef unsigned int uint;\n"])
def test_glibc_type_names_compile_as_under_nvcc(own: str) -> None:
    result = check_document(Document(own + GLIBC_NAMES, "hist.cu"))
    (k,) = result.kernels
    assert k.ok, [d.message for d in k.diagnostics]


@pytest.mark.parametrize("include", ["#include <stdlib.h>\n", "#include <cstdint>\n"])
def test_fixed_width_integers_without_stdint_compile_as_under_nvcc(include: str) -> None:
    """HeCBench's scan takes `const int64_t nblocks` and includes only host headers: nvcc's units
    have `int64_t` through glibc's <sys/types.h>; the standalone unit includes NVRTC's <cstdint>
    (once: not again where the file includes it)."""
    text = (
        include
        + """__global__ void fill(const int64_t n, int32_t* out) {
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) out[i] = (int32_t)i;
}
"""
    )
    result = check_document(Document(text, "fill.cu"))
    (k,) = result.kernels
    assert k.ok, [d.message for d in k.diagnostics]
