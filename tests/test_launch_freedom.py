"""Launches as free as the spec allows: a grid written with numbers (``grid=cdiv(rows, 64)
block=64``) follows a new block like one written over ``block``; a constant grid keeps its
number."""

from __future__ import annotations

from pathlib import Path

from cudasrc import specs as spec_mod
from cudasrc.source import Document
from engine import NotApplicable, Subject, grid_over_block
from engine.mechanical import BlockSize
from engine.passes import Apply
from engine.row_parallel import RowParallel, Rows

KERNELS = Path(__file__).parent.parent / "bench" / "kernels"


def softmax(launch: str, head: str = "") -> Subject:
    text = head + (KERNELS / "softmax.cu").read_text().replace(
        "launch grid=cdiv(rows, block) block=128", launch
    )
    doc = Document(text)
    spec, errors = spec_mod.parse(doc.kernels[0], doc.type_aliases, doc.integer_constants)
    assert spec is not None and not errors, errors
    return Subject(doc.text_in(doc.kernels[0].span), spec, context=doc.text)


def test_a_grid_written_with_the_block_size_is_written_grid_over_block() -> None:
    assert grid_over_block(("cdiv(rows, 64)",), ("64",)) == ("cdiv(rows, block)",)
    assert grid_over_block(("cdiv(w, 16)", "cdiv(h, 16)", "b"), ("16", "16")) == (
        "cdiv(w, block_x)",
        "cdiv(h, block_y)",
        "b",
    )
    assert grid_over_block(("cdiv(n, 64 * 4)",), ("64",)) == ("cdiv(n, block * 4)",)


def test_a_constant_grid_or_one_over_block_is_kept() -> None:
    assert grid_over_block(("64",), ("64",)) == ("64",)  # a fixed number of blocks
    assert grid_over_block(("cdiv(n, block)",), ("64",)) == ("cdiv(n, block)",)
    assert grid_over_block(("cdiv(n, 64)",), ("BLOCK",)) == ("cdiv(n, 64)",)  # no constant block: unknown


def test_the_row_pass_rewrites_a_launch_written_with_numbers() -> None:
    out = Apply(RowParallel(), Rows("warp", 256)).apply(softmax("launch grid=cdiv(rows, 64) block=64"))
    assert not isinstance(out, NotApplicable), out.reason
    assert out.launch is not None and (out.launch.grid, out.launch.block) == ("cdiv(rows, block / 32)", "256")


def test_a_new_block_size_follows_a_grid_written_with_numbers() -> None:
    out = BlockSize((256,)).apply(softmax("launch grid=cdiv(rows, 64) block=64"))
    assert not isinstance(out, NotApplicable), out.reason
    fixed = BlockSize((256,)).apply(softmax("launch grid=64 block=64"))
    assert isinstance(fixed, NotApplicable) and "not written over `block`" in fixed.reason


def test_a_grid_whose_number_is_also_an_output_layout_keeps_it() -> None:
    # one partial sum per block of 256: a new block would change what `partial` holds
    assert grid_over_block(("cdiv(n, 256)",), ("256",), ("n", "cdiv(n, 256)")) == ("cdiv(n, 256)",)


def test_spec_expressions_name_the_files_macros_and_constexprs() -> None:
    for head in ("#define ROW_BLOCK (32 * 2)\n", "constexpr int ROW_BLOCK = 64;\n"):
        s = softmax("launch grid=cdiv(rows, ROW_BLOCK) block=ROW_BLOCK", head)
        assert (s.spec.grid, s.spec.block) == (("cdiv(rows, 64)",), ("64",))
        assert spec_mod.problems(s.spec)[-1].launch.block == (64, 1, 1)
        out = Apply(RowParallel(), Rows("warp", 256)).apply(s)
        assert not isinstance(out, NotApplicable), out.reason


def test_a_size_named_like_a_macro_wins_and_an_unknown_name_is_still_an_error() -> None:
    s = softmax("launch grid=cdiv(rows, block) block=128", "#define rows 7\n")
    assert s.spec.grid == ("cdiv(rows, block)",)
    doc = Document(
        "// @cuda-agent sizes n=8\n// @cuda-agent launch block=NOPE\n__global__ void k(int n) {}\n"
    )
    _, errors = spec_mod.parse(doc.kernels[0], doc.type_aliases, doc.integer_constants)
    assert errors and "unknown name `NOPE`" in errors[0].message


def test_no_new_block_for_a_kernel_whose_output_is_sized_over_the_block() -> None:
    """A grid-stride reduction writes one partial sum per block into ``g_out[min(528, cdiv(n,
    block))]``: at another block it writes other sums (and more or fewer of them), so the block
    size is not the engine's to change (on the H100 its four block candidates could only mismatch)."""
    path = (
        Path(__file__).parent.parent
        / "bench/corpus/tree_reduction/learn-cuda-programming__reduction_kernel_gridstride.cu"
    )
    doc = Document.from_file(path)
    spec, errors = spec_mod.parse(doc.kernels[0], doc.type_aliases, doc.integer_constants)
    assert spec is not None and not errors, errors
    out = BlockSize((128,)).apply(Subject(doc.text_in(doc.kernels[0].span), spec, context=doc.text))
    assert (
        isinstance(out, NotApplicable) and "`g_out[min(528, cdiv(n, block))]` follows the block" in out.reason
    )
