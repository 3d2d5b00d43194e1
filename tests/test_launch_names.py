"""Launch edits keep the user's names: a block written as a named constant keeps its name (its
value changes, or one new constant carries the new block), grids are written over that name, and a
declaration goes only when nothing uses it any more."""

from __future__ import annotations

import difflib
from pathlib import Path

from agent.target import target_for
from cudasrc.launch import LaunchChange
from cudasrc.source import Document

ROOT = Path(__file__).resolve().parents[1]

SPEC = """// @cuda-agent sizes n=1<<20 verify n=1000
// @cuda-agent launch grid=cdiv(n, block) block=32
// @cuda-agent arg a in float[n]
// @cuda-agent arg c out float[n]
// @cuda-agent arg n = n
__global__ void vadd(const float* a, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i];
}
"""

WIDER = LaunchChange(grid="cdiv(n, block * 4)", block="256")  # 4 elements a thread


def rewrite(text: str, change: LaunchChange = WIDER, path: str = "vadd.cu") -> tuple[str, int]:
    t = target_for(Document(text, path), "vadd")
    assert t.site_edits is not None
    le = t.site_edits(change)
    return t.file_with(t.definition, le.edits), le.sites


def changed(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and line[:3] not in ("---", "+++") and "@cuda-agent" not in line
    ]


def test_the_quick_start_keeps_threads_and_changes_its_value() -> None:
    path = ROOT / "bench/kernels/vadd_poor_block.cu"
    text = path.read_text()
    out, sites = rewrite(text, path=str(path))
    assert sites == 1
    assert changed(text, out) == [
        "-    const int threads = 32;",
        "+    const int threads = 256;",
        "-    vadd<<<(n + threads - 1) / threads, threads>>>(a, b, c, n);",
        "+    vadd<<<(n + threads * 4 - 1) / (threads * 4), threads>>>(a, b, c, n);",
    ]


def test_a_grid_that_follows_the_block_name_is_kept() -> None:
    main = "void run(float* a, float* c, int n) {\n    const int threads = 32;\n    vadd<<<(n+threads-1)/threads, threads>>>(a, c, n);\n}\n"
    out, sites = rewrite(SPEC + main, LaunchChange(block="128"))
    assert sites == 1
    assert changed(SPEC + main, out) == ["-    const int threads = 32;", "+    const int threads = 128;"]


def test_a_define_block_changes_the_macro() -> None:
    text = (
        "#define BLOCK 32\n"
        + SPEC
        + "void run(float* a, float* c, int n) {\n    vadd<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(a, c, n);\n}\n"
    )
    out, _ = rewrite(text)
    assert changed(text, out) == [
        "-#define BLOCK 32",
        "+#define BLOCK 256",
        "-    vadd<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(a, c, n);",
        "+    vadd<<<(n + BLOCK * 4 - 1) / (BLOCK * 4), BLOCK>>>(a, c, n);",
    ]


def test_a_dim3_block_and_grid_change_in_their_declarations() -> None:
    main = """void run(float* a, float* c, int n) {
    dim3 block(32);
    dim3 grid((n+block.x-1)/block.x);
    vadd<<<grid, block>>>(a, c, n);
}
"""
    out, _ = rewrite(SPEC + main)
    assert changed(SPEC + main, out) == [
        "-    dim3 block(32);",
        "-    dim3 grid((n+block.x-1)/block.x);",
        "+    dim3 block(256);",
        "+    dim3 grid((n + block.x * 4 - 1) / (block.x * 4));",
    ]
    # a new block alone: the grid, written over block.x, is right as it is
    out, _ = rewrite(SPEC + main, LaunchChange(block="128"))
    assert changed(SPEC + main, out) == ["-    dim3 block(32);", "+    dim3 block(128);"]


def test_a_constant_of_two_launches_changes_once_for_both() -> None:
    main = """void run(float* a, float* c, int n) {
    const int threads = 32;
    vadd<<<(n + threads - 1) / threads, threads>>>(a, c, n);
    vadd<<<(n + threads - 1) / threads, threads>>>(c, a, n);
}
"""
    out, sites = rewrite(SPEC + main)
    assert sites == 2
    assert out.count("const int threads = 256;") == 1
    assert out.count("vadd<<<(n + threads * 4 - 1) / (threads * 4), threads>>>") == 2


def test_a_constant_used_elsewhere_keeps_its_value_and_one_new_constant_carries_the_block() -> None:
    main = """void run(float* a, float* c, int n) {
    const int threads = 32;  // threads per block
    vadd<<<(n + threads - 1) / threads, threads>>>(a, c, n);
    vadd<<<(n + threads - 1) / threads, threads>>>(c, a, n);
    printf("%d\\n", threads);
}
"""
    out, _ = rewrite(SPEC + main)
    assert changed(SPEC + main, out) == [
        "-    vadd<<<(n + threads - 1) / threads, threads>>>(a, c, n);",
        "-    vadd<<<(n + threads - 1) / threads, threads>>>(c, a, n);",
        "+    const int vadd_threads = 256;",
        "+    vadd<<<(n + vadd_threads * 4 - 1) / (vadd_threads * 4), vadd_threads>>>(a, c, n);",
        "+    vadd<<<(n + vadd_threads * 4 - 1) / (vadd_threads * 4), vadd_threads>>>(c, a, n);",
    ]
    assert "const int threads = 32;  // threads per block" in out


def test_a_macro_the_kernel_also_uses_gets_a_new_macro() -> None:
    text = (
        "#define BLOCK 32\n"
        + SPEC.replace("int i = blockIdx.x", "__shared__ float s[BLOCK];\n    int i = blockIdx.x")
        + "void run(float* a, float* c, int n) {\n    vadd<<<(n + BLOCK - 1) / BLOCK, BLOCK>>>(a, c, n);\n}\n"
    )
    out, _ = rewrite(text, LaunchChange(block="128"))
    assert "#define BLOCK 32\n#define VADD_BLOCK 128\n" in out
    assert "vadd<<<(n + VADD_BLOCK - 1) / VADD_BLOCK, VADD_BLOCK>>>(a, c, n);" in out


def test_a_constant_another_kernels_launch_uses_is_left_to_it() -> None:
    main = """__global__ void other(float* c, int n) {}
void run(float* a, float* c, int n) {
    const int threads = 32;
    vadd<<<(n + threads - 1) / threads, threads>>>(a, c, n);
    other<<<(n + threads - 1) / threads, threads>>>(c, n);
}
"""
    out, _ = rewrite(SPEC + main, LaunchChange(block="128"))
    assert "const int threads = 32;\n    const int vadd_threads = 128;\n" in out
    assert "other<<<(n + threads - 1) / threads, threads>>>(c, n);" in out


def test_a_dim3_of_a_macro_parsed_as_a_declaration_of_a_function_is_still_the_block() -> None:
    main = """void run(float* a, float* c, int n) {
    dim3 block(BLOCK);
    vadd<<<(n + BLOCK - 1) / BLOCK, block>>>(a, c, n);
}
"""
    text = "#define BLOCK 32\n" + SPEC + main
    out, _ = rewrite(text, LaunchChange(block="128"))
    assert changed(text, out) == [
        "-    dim3 block(BLOCK);",
        "-    vadd<<<(n + BLOCK - 1) / BLOCK, block>>>(a, c, n);",
        "+    dim3 block(128);",
        "+    vadd<<<(n + block.x - 1) / block.x, block>>>(a, c, n);",
    ]


def test_a_grid_the_spec_writes_without_the_block_is_kept() -> None:
    text = SPEC.replace("grid=cdiv(n, block)", "grid=cdiv(n, 32)") + (
        "void run(float* a, float* c, int n) {\n    const int threads = 32;\n"
        "    const int blocks = (n + 31) / 32;\n    vadd<<<blocks, threads>>>(a, c, n);\n}\n"
    )
    out, _ = rewrite(text, LaunchChange(block="128"))
    assert changed(text, out) == ["-    const int threads = 32;", "+    const int threads = 128;"]


def test_a_new_constant_goes_in_before_a_declaration_that_goes() -> None:
    main = """void run(float* a, float* c, int n) {
    const int threads = 32;
    const int per = 32;
    vadd<<<(n + per - 1) / per, threads>>>(a, c, n);
    printf("%d", threads);
}
"""
    out, _ = rewrite(SPEC + main, LaunchChange(block="128"))
    assert out.endswith(
        """    const int threads = 32;
    const int vadd_threads = 128;
    vadd<<<(n + vadd_threads - 1) / vadd_threads, vadd_threads>>>(a, c, n);
    printf("%d", threads);
}
"""
    )
