"""Each source transformation: applies where it should (with the rewrite compiling under NVRTC and
the structure it promises), refuses with a reason where it should not, composes; on the GPU
(``gpu`` marker) every rewrite of bench/kernels/ is equivalent to the original under the sandbox."""

from __future__ import annotations

import dataclasses
import itertools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from agent import loop
from agent.proposal import Proposal
from agent.target import Target, target_for
from cudasrc import dtypes
from cudasrc import specs as spec_mod
from cudasrc.source import Document
from engine import NotApplicable, Subject, Transform, Transformed, apply_all
from engine.compose import Chain
from engine.elementwise import GridStride, Vectorize
from engine.histogram import SharedHistogram
from engine.mechanical import (
    BlockSize,
    FastMath,
    LaunchBounds,
    ReadOnlyLoads,
    RestrictConst,
    Unroll,
)
from engine.passes import Apply
from engine.row_parallel import RowParallel, Rows, StridedRowVectors
from engine.same_layout import SameLayoutReduction
from engine.tiled_dot import Tile, TiledDot
from engine.tiled_transpose import TiledTranspose
from engine.warp_reduction import WarpReduction
from sandbox.compiler import compile_cuda
from sandbox.contract import Candidate, EvalOptions, EvalRequest, EvalResult, Status

KERNELS = Path(__file__).parent.parent / "bench" / "kernels"
DATA = Path(__file__).parent / "data" / "transforms"
TRANSPOSE = Apply(TiledTranspose(), (32, 8))
# sequential addressing, then the last warp with shuffles: two passes composed in one rewrite
SHUFFLED = Chain((Apply(SameLayoutReduction(), "sequential"), Apply(WarpReduction(), WarpReduction())))


def target(name: str, kernel: str | None = None, folder: Path = KERNELS) -> Target:
    return target_for(Document.from_file(folder / name), kernel)


def case(name: str) -> Target:
    """A case's kernel: ``file.cu`` of bench/kernels/ or tests/data/transforms/ (its first kernel),
    or ``file.cu:kernel``."""
    file, _, kernel = name.partition(":")
    folder = DATA if (DATA / file).exists() else KERNELS
    return target(file, kernel or ("scale" if file == "edge_forms.cu" else None), folder)


def subject(t: Target) -> Subject:
    doc = Document(t.text, t.path)
    k = doc.kernel_at(t.text.count("\n", 0, t.definition_start))
    assert k is not None
    spec, errors = spec_mod.parse(k)
    assert spec is not None and not errors
    return Subject(t.definition, spec)


def rewrite(t: Target, *transforms: Transform) -> Subject:
    out = apply_all(subject(t), transforms)
    assert isinstance(out, Subject), out
    return out


def tiled(*tile: int) -> Apply:
    """The tiled dot product with one of its tile shapes (128x128x8, 8x8 per thread, staged
    outputs by default)."""
    return Apply(TiledDot(), Tile(*tile) if tile else TiledDot.space[0])


def compiles(t: Target, code: str) -> None:
    out = compile_cuda(t.unit_with(code), name_expressions=(t.kernel,), options=t.baseline.options)
    assert out.result.ok, out.result.log


ROWS = (  # thread-per-row kernels the row-parallel pass rewrites
    "softmax.cu",
    "layernorm.cu",
    "matvec.cu",
    "softmax_double.cu",
    "attention_softmax.cu",
    "layernorm_stats.cu",
)
# 1- and 2-byte element types in 16-byte packs, and the index forms of real code (tests/data/transforms/)
NARROW: list[tuple[str, tuple[Transform, ...]]] = [
    ("gelu_bf16.cu", (Vectorize(16),)),
    ("gelu_bf16.cu", (Vectorize(16, 4), FastMath())),
    ("residual_bf16.cu", (Vectorize(16, 2), RestrictConst())),
    ("narrow_forms.cu:widen_bf16", (Vectorize(16),)),
    ("narrow_forms.cu:axpy_half", (Vectorize(16),)),
    ("narrow_forms.cu:invert_u8", (Vectorize(16),)),
    ("narrow_forms.cu:relu_s8", (Vectorize(8, 2),)),
    ("narrow_forms.cu:relu_s8", (GridStride(1, max_blocks=3),)),
    ("narrow_forms.cu:scale_bf16_loop", (Vectorize(16), RestrictConst())),
    ("index_forms.cu:transpose_split", (Apply(TiledTranspose(), (64, 16)),)),
    ("index_forms.cu:transpose_return", (Apply(TiledTranspose(), (32, 16)), RestrictConst())),
    ("index_forms.cu:histogram_offset", (SharedHistogram(max_blocks=3),)),
    # (BlockSize after it is refused: the tutorial sizes a static __shared__ array by its written block)
    ("histogram_index.cu", (SharedHistogram(max_blocks=3),)),
    ("transpose_1d.cu", (Apply(TiledTranspose(), (32, 16)),)),
]
# (file, transforms, what the rewrite must contain)
CASES: list[tuple[str, tuple[Transform, ...]]] = [
    ("vadd_poor_block.cu", (BlockSize((256,)),)),
    ("vadd_poor_block.cu", (RestrictConst(),)),
    ("vadd_poor_block.cu", (ReadOnlyLoads(),)),
    ("vadd_poor_block.cu", (GridStride(4),)),
    ("vadd_poor_block.cu", (Vectorize(16),)),
    (
        "vadd_poor_block.cu",
        (Vectorize(16), RestrictConst(), ReadOnlyLoads(), BlockSize((256,)), LaunchBounds()),
    ),
    ("saxpy.cu", (Vectorize(8, 2),)),
    ("gather.cu", (Vectorize(16), ReadOnlyLoads())),
    ("relu_double.cu", (Vectorize(16),)),
    ("histogram.cu", (GridStride(2), Unroll(4))),
    ("histogram.cu", (SharedHistogram(),)),
    ("histogram.cu", (SharedHistogram(max_blocks=64), BlockSize((256,)), LaunchBounds())),
    ("sigmoid.cu", (FastMath(), Vectorize(16))),
    ("softmax.cu", (FastMath(), Unroll(4))),
    ("matmul.cu", (Unroll(8), BlockSize((32, 8)), LaunchBounds())),
    ("block_sum.cu", (WarpReduction(),)),
    ("row_max.cu", (WarpReduction(), RestrictConst())),
    ("transpose.cu", (TRANSPOSE, LaunchBounds())),
    ("transpose_1d.cu", (TRANSPOSE, RestrictConst())),
    ("stencil2d.cu", (ReadOnlyLoads(), BlockSize((32, 8)))),
    ("matmul.cu", (tiled(),)),
    ("matmul_bias.cu", (tiled(128, 64, 16, 8, 4), RestrictConst())),
    ("sgemm.cu", (tiled(),)),
    ("attention_scores.cu", (tiled(),)),
    *((name, (Apply(RowParallel(), rows),)) for name in ROWS for rows in RowParallel.space),
    ("softmax.cu", (Apply(RowParallel(), Rows("warp", 128)), RestrictConst(), FastMath())),
    ("row_atomic.cu", (Apply(RowParallel(), Rows("warp", 256, 4)),)),
    *(
        (f"row_grid_stride.cu:{k}", (Apply(RowParallel(), rows),))
        for k in ("row_mean_strided", "row_max_strided")
        for rows in (Rows("warp", 128), Rows("block", 256))
    ),
    ("reduce_interleaved.cu", (SHUFFLED,)),
    ("reduce_interleaved.cu", (Apply(SameLayoutReduction(), "sequential"), RestrictConst())),
    *NARROW,
    ("row_max.cu", (Apply(StridedRowVectors(), 16), RestrictConst(), Unroll(2))),
]


@pytest.mark.slow  # an NVRTC compile per case
@pytest.mark.parametrize("name, transforms", CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_rewrite_compiles_with_nvrtc(name: str, transforms: tuple[Transform, ...]) -> None:
    t = case(name)
    out = rewrite(t, *transforms)
    assert out.code != t.definition or out.launch != loop.LaunchChange()
    compiles(t, out.code)
    if out.launch.grid or out.launch.block:  # the spec can resolve the new launch for every size
        launches = t.relaunch(out.launch) if t.relaunch else ()
        assert len(launches) == len(t.problems)


def test_block_size_changes_only_the_launch() -> None:
    t = target("vadd_poor_block.cu")
    out = rewrite(t, BlockSize((256,)))
    assert out.code == t.definition
    assert out.launch == loop.LaunchChange(block="256")
    assert t.relaunch is not None
    bench = t.relaunch(out.launch)[-1]
    assert bench.block == (256, 1, 1) and bench.grid == ((1 << 26) // 256, 1, 1)


def test_restrict_const_marks_inputs_const_and_records_the_aliasing_assumption() -> None:
    out = rewrite(target("vadd_poor_block.cu"), RestrictConst())
    params = {p.name: p for p in Document(out.code).kernels[0].params}
    assert all(params[n].restrict for n in "abc")
    assert params["a"].const and params["b"].const and not params["c"].const
    assert out.assumptions == ("a, b and c never alias",)
    again = RestrictConst().apply(out)
    assert isinstance(again, NotApplicable) and "already" in again.reason


def test_read_only_loads_wrap_input_reads_only() -> None:
    out = rewrite(target("gather.cu"), ReadOnlyLoads())
    assert "__ldg(&table[__ldg(&idx[i])])" in out.code
    assert "__ldg(&out" not in out.code
    stencil = rewrite(target("stencil2d.cu"), ReadOnlyLoads())
    assert stencil.code.count("__ldg(&u[") == 5 and "__ldg(&v" not in stencil.code


def test_grid_stride_loop_shrinks_the_grid_and_keeps_the_body() -> None:
    t = target("bias_add.cu")
    out = rewrite(t, GridStride(4))
    assert out.launch.grid == "cdiv(rows * cols, block * 4)"
    assert "j += stride" in out.code
    assert "out[i] = x[i] + bias[i % cols];" in out.code
    assert "const int i = (int)j;" in out.code


def test_vectorize_checks_alignment_and_keeps_a_scalar_tail() -> None:
    out = rewrite(target("vadd_poor_block.cu"), Vectorize(16))
    assert out.launch.grid == "cdiv(n, block * 4)"
    assert "% 16) == 0" in out.code  # runtime alignment check of every vectorised pointer
    for name in "abc":
        assert f"reinterpret_cast<unsigned long long>({name})" in out.code
    assert "reinterpret_cast<const float4*>(a)[v]" in out.code
    assert "reinterpret_cast<float4*>(c)[v] = c_vec;" in out.code
    assert "reinterpret_cast<const float4*>(c)" not in out.code  # an output written in full is not read
    assert "c[i] = a[i] + b[i];" in out.code  # the scalar path: misaligned pointers and the tail
    capped = rewrite(target("vadd_poor_block.cu"), Vectorize(16, 1, max_blocks=1056))
    assert capped.launch.grid == "min(cdiv(n, block * 4), 1056)"
    t = target("vadd_poor_block.cu")
    assert t.relaunch is not None
    assert [x.grid[0] for x in t.relaunch(capped.launch)] == [
        8,
        33,
        513,
        1056,
    ]  # blocks of 32 threads x 4 lanes
    double = rewrite(target("relu_double.cu"), Vectorize(16))
    assert "double2" in double.code and double.launch.grid == "cdiv(n, block * 2)"
    coarse = rewrite(target("saxpy.cu"), Vectorize(8, 2))
    assert "float2" in coarse.code and coarse.launch.grid == "cdiv(n, block * 4)"
    assert "reinterpret_cast<float2*>(y)[v] = y_vec;" in coarse.code  # inout: loaded and stored


def test_vectorize_packs_8_bf16_or_16_int8_lanes_and_keeps_float_math() -> None:
    gelu = rewrite(case("gelu_bf16.cu"), Vectorize(16))
    assert gelu.launch.grid == "cdiv(N, block * 8)"  # the grid covers n / 8 threads
    assert "const uint4 inp_vec = reinterpret_cast<const uint4*>(inp)[v];" in gelu.code
    assert "__nv_bfloat16* ca_out = reinterpret_cast<__nv_bfloat16*>(&out_vec);" in gelu.code
    assert "float xi = __bfloat162float(ca_inp[k]);" in gelu.code  # the math stays in float
    assert "reinterpret_cast<uint4*>(out)[v] = out_vec;" in gelu.code
    s8 = rewrite(case("narrow_forms.cu:relu_s8"), Vectorize(16))
    assert s8.launch.grid == "cdiv(n, block * 16)" and "k < 16" in s8.code
    assert "int tid" not in s8.code and "const int i = (int)j;" in s8.code  # `if (i >= n) return;`
    # a bf16 input of a float output: 4 lanes, the float4 aligned to 16 bytes and the bf16 pack to 8
    mixed = rewrite(case("narrow_forms.cu:widen_bf16"), Vectorize(16))
    assert mixed.launch.grid == "cdiv(n, block * 4)"
    assert "const uint2 x_vec = reinterpret_cast<const uint2*>(x)[v];" in mixed.code
    assert "% 16) == 0 && ((reinterpret_cast<unsigned long long>(x)) % 8) == 0" in mixed.code
    strided = rewrite(case("narrow_forms.cu:scale_bf16_loop"), Vectorize(16))  # a grid-stride loop already
    assert strided.launch == loop.LaunchChange()  # its own grid is kept
    assert "ca_y[k] = __float2bfloat16(s * __bfloat162float(ca_x[k]));" in strided.code
    half = rewrite(case("narrow_forms.cu:axpy_half"), Vectorize(16))
    assert "uint4 y_vec = reinterpret_cast<const uint4*>(y)[v];" in half.code  # inout: loaded
    assert "__half2float(ca_y[k])" in half.code  # `y[(size_t)i]` is `y[i]`


@pytest.mark.parametrize(
    "name, reason",
    [
        ("index_forms.cu:carried", "assigns `acc`, declared outside it"),
        ("index_forms.cu:lane_before", "uses `lane`, which depends on the thread's position"),
        ("edge_forms.cu:lane_id", "uses the thread's position"),
    ],
)
def test_elementwise_rewrites_refuse_bodies_that_are_not_per_element(name: str, reason: str) -> None:
    for transform in (GridStride(1), Vectorize(16)):
        out = transform.apply(subject(case(name)))
        assert isinstance(out, NotApplicable) and reason in out.reason, out


def test_vectorize_leaves_indirect_accesses_scalar() -> None:
    out = rewrite(target("gather.cu"), Vectorize(16))
    assert "ca_table" not in out.code  # read through an index: stays a scalar load
    assert "ca_out[k] = table[ca_idx[k]];" in out.code
    hist = rewrite(target("histogram.cu"), Vectorize(16))
    assert "atomicAdd(&hist[ca_data[k] & 255], 1u);" in hist.code


def test_unroll_adds_one_pragma_per_loop() -> None:
    out = rewrite(target("layernorm.cu"), Unroll(4))
    assert out.code.count("#pragma unroll 4") == 3
    assert isinstance(Unroll(2).apply(out), NotApplicable)


def test_launch_bounds_follow_the_block_in_force() -> None:
    out = rewrite(target("vadd_poor_block.cu"), BlockSize((512,)), LaunchBounds())
    assert "__launch_bounds__(512) vadd(" in out.code
    tiled = rewrite(target("transpose.cu"), TRANSPOSE, LaunchBounds())
    assert "__launch_bounds__(256)" in tiled.code


def test_warp_reduction_replaces_the_last_steps_with_shuffles() -> None:
    out = rewrite(target("block_sum.cu"), WarpReduction())
    assert "s > 32; s >>= 1" in out.code
    assert "v += __shfl_down_sync(0xffffffffu, v, o);" in out.code
    assert "v += sdata[tid + 32];" in out.code
    maxed = rewrite(target("row_max.cu"), WarpReduction())
    assert "v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));" in maxed.code


def test_tiled_transpose_launches_tiles() -> None:
    out = rewrite(target("transpose.cu"), TRANSPOSE)
    assert "__shared__ float tile[32][33];" in out.code
    assert out.launch == loop.LaunchChange(grid="(cdiv(cols, 32), cdiv(rows, 32))", block="(32, 8)")


def test_tiled_transpose_sees_through_the_index_forms_of_real_code() -> None:
    """A 1-D index split by `/` and `%` in locals and guarded by its parts, with `size_t` index
    arithmetic (kept); a 2-D transpose with an early return written in either operand order."""
    split = rewrite(case("index_forms.cu:transpose_split"), Apply(TiledTranspose(), (64, 16)))
    assert "__shared__ float tile[64][65];" in split.code
    assert "dst[(size_t)(r + j) * rows + c] = tile[threadIdx.x][threadIdx.y + j];" in split.code
    assert split.launch == loop.LaunchChange(grid="(cdiv(cols, 64), cdiv(rows, 64))", block="(64, 16)")
    early = rewrite(case("index_forms.cu:transpose_return"), TRANSPOSE)
    assert "__shared__ double tile[32][33];" in early.code
    assert "tile[threadIdx.y + j][threadIdx.x] = a[(row + j) * w + col];" in early.code
    assert early.launch == loop.LaunchChange(grid="(cdiv(w, 32), cdiv(h, 32))", block="(32, 8)")


TILED = ("matmul.cu", "matmul_bias.cu", "sgemm.cu", "attention_scores.cu")


def fast_branches(code: str) -> list[str]:
    """The bodies of the rewrite's vector-load branches (``if (fast_...) { ... } else``)."""
    out = []
    for part in code.split("if (fast_")[1:]:
        body = part.split("} else {")[0]
        out.append(body[body.index("{") + 1 :])
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", TILED)
def test_tiled_dot_compiles_without_spills_for_every_searched_tile(name: str) -> None:
    """Every tile shape the search tries compiles under NVRTC for the 256 threads it launches,
    with no spills, vector loads (float4, float2 for 64x64x8) behind a per-block alignment check,
    no bounds checks on the vector path, and the launch over tiles."""
    t = target(name)
    for tile in TiledDot.space:
        assert isinstance(tile, Tile)
        out = rewrite(t, Apply(TiledDot(), tile))
        assert out.launch.block == str(tile.threads) == "256"
        assert "__launch_bounds__(256, 2)" in out.code
        grid = out.launch.grid or ""
        assert f", {tile.bn})" in grid and f", {tile.bm})" in grid
        assert re.search(r"\)\) % (16|8) == 0\);", out.code), tile  # the block's alignment check
        assert re.search(r"reinterpret_cast<const float[24]\*>\((A|B|inp|weight|q|k) \+", out.code), tile
        branches = fast_branches(out.code)
        assert len(branches) == 4, tile  # both operands, before the loop and inside it
        for branch in branches:  # the only comparison on the vector path is its unrolled loop's
            assert re.findall(r" (<|<=|>|>=) ", branch) == ["<"], branch
        # two buffers: one barrier per K tile (and two per row of outputs through the stage)
        assert out.code.count("__syncthreads();") == (3 if tile.staged else 1)
        build = compile_cuda(t.unit_with(out.code), name_expressions=(t.kernel,), options=t.baseline.options)
        assert build.result.ok, build.result.log
        (res,) = build.result.resources.values()
        assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0, (tile, res)
        assert res.registers <= 128 and res.shared_bytes <= 48 * 1024


def test_tiled_dot_keeps_the_epilogue_and_substitutes_the_layout() -> None:
    """inp @ W^T reads both tiles along k; the bias, alpha/beta and the causal -INFINITY write stay;
    a tile above the causal diagonal skips its K loop."""
    bias = rewrite(target("matmul_bias.cu"), tiled())
    assert "reinterpret_cast<const float4*>(weight + (r * C + c))" in bias.code
    assert "float val = bias[oc];" in bias.code and "val += Cs[o / 128][o % 128];" in bias.code
    assert "const int gy = n0 + o % 128;" in bias.code  # consecutive threads, consecutive oc
    direct = rewrite(target("matmul_bias.cu"), tiled(128, 128, 8, 8, 8, False))
    assert "val += acc[ca_i][j];" in direct.code and "Cs[" not in direct.code
    assert bias.launch.grid == "(cdiv((oc), 128), cdiv((bt), 128))"  # columns follow out's contiguous oc
    gemm = rewrite(target("sgemm.cu"), tiled())
    assert "C[x * N + y] = alpha * tmp + beta * C[x * N + y];" in gemm.code
    # B row-major: its vectors run along n, straight into the tile
    assert "*reinterpret_cast<float4*>(&Bs[buf][kk][ca_x]) = rb[s];" in gemm.code
    assert "masked" not in gemm.code  # no early exit compares the two indices
    causal = rewrite(target("attention_scores.cu"), tiled())
    assert "= -INFINITY;\n                continue;" in causal.code
    assert causal.launch.grid == "(cdiv((t), 128), cdiv((t), 128), bh)"
    assert "HS * T * blockIdx.z" in causal.code  # the batch offset is uniform in the tile loads
    assert "const bool masked = ((n0) - (m0 + 127) > 0);" in causal.code
    assert "if (!masked) {" in causal.code


def test_tiled_dot_substitutes_a_transposed_layout_with_wide_indices() -> None:
    out = rewrite(target("dot_forms.cu", folder=DATA), tiled())
    # A is k-major: its tile loads run along the rows (float4 straight into the transposed tile)
    assert "reinterpret_cast<const float4*>(A + ((size_t)c * M + (size_t)r))" in out.code
    assert "*reinterpret_cast<float4*>(&As[buf][kk][ca_x]) = ra[s];" in out.code
    assert "acc += Cs[o / 128][o % 128];" in out.code and "continue;" in out.code


def test_tiled_dot_guesses_the_tile_from_the_problem_size() -> None:
    """Large problems get 128x128 tiles; a problem whose 128x128 tiles leave most SMs idle in their
    last wave gets smaller ones; tile shapes that do not divide into warps are refused."""
    dot = TiledDot()
    guesses = {}
    for name in TILED:
        found = dot.match(subject(target(name)).view)
        assert not isinstance(found, NotApplicable), found
        guesses[name] = dot.guess(found)
    assert guesses["matmul.cu"] == guesses["sgemm.cu"] == Tile(128, 128, 8, 8, 8)  # 256 tiles: one wave
    assert guesses["attention_scores.cu"] == Tile(128, 128, 8, 8, 8)  # 6144 tiles: many waves
    assert guesses["matmul_bias.cu"] == Tile(64, 64, 8, 4, 4)  # 288 128x128 tiles: 24 in a second wave
    small = dot.match(subject(target("dot_forms.cu", folder=DATA)).view)
    assert not isinstance(small, NotApplicable)
    assert dot.guess(small) == Tile(64, 64, 8, 4, 4)  # 70x37 outputs
    odd = dot.rewrite(small, Tile(96, 64, 8, 8, 8))
    assert isinstance(odd, NotApplicable) and "does not divide into warps" in odd.reason


def test_tiled_dot_refuses_broken_and_empty_loop_bodies_without_raising() -> None:
    """Mutants the fuzz found: a loop whose body is an empty statement once raised IndexError."""
    t = target("matmul.cu")
    spec = subject(t).spec
    empty = t.definition.replace(
        "for (int p = 0; p < k; ++p) acc += A[row * k + p] * B[p * n + col];",
        "for (int p = 0; p < k; ++p) ; acc += A[row * k + p] * B[p * n + col];",
    )
    broken = t.definition.replace("float acc = 0.0f;", "float acc = = 0.0f;")
    assert empty != t.definition and broken != t.definition
    for code, reason in ((empty, "not one `acc += A[..] * B[..];`"), (broken, "does not parse cleanly")):
        out = tiled().apply(Subject(code, spec))
        assert isinstance(out, NotApplicable) and reason in out.reason, out


def test_shared_histogram_counts_per_block_and_merges_once() -> None:
    out = rewrite(target("histogram.cu"), SharedHistogram())
    assert "__shared__ unsigned int ca_hist[256];" in out.code
    assert "atomicAdd(&ca_hist[data[i] & 255], 1u);" in out.code
    assert "if (ca_hist[k] != 0) atomicAdd(&hist[k], ca_hist[k]);" in out.code
    assert out.code.count("__syncthreads();") == 2 and out.launch == loop.LaunchChange()
    capped = rewrite(target("histogram.cu"), SharedHistogram(max_blocks=528), BlockSize((512,)))
    assert capped.launch == loop.LaunchChange(grid="min(cdiv(n, block), 528)", block="512")
    assert "j += stride" in capped.code  # each thread loops over many elements
    early = SharedHistogram().apply(subject(target("edge_forms.cu", "early_exit_histogram", DATA)))
    assert isinstance(early, NotApplicable) and "returns early" in early.reason
    compact = SharedHistogram().apply(subject(target("edge_forms.cu", "compact", DATA)))
    assert isinstance(compact, NotApplicable) and "value an atomicAdd returns is used" in compact.reason
    tutorial = rewrite(case("histogram_index.cu"), SharedHistogram())
    assert "atomicAdd(&(hist[a[i]]), 1);" in tutorial.code  # `atomicAdd(&(y[a[i]]), 1)`
    offset = rewrite(case("index_forms.cu:histogram_offset"), SharedHistogram(max_blocks=64))
    assert "atomicAdd(hist + bin, 1u);" in offset.code and "__shared__ unsigned int hist[128];" in offset.code


def test_fast_math_uses_intrinsics() -> None:
    out = rewrite(target("sigmoid.cu"), FastMath())
    assert "__fdividef(1.0f, (1.0f + __expf(-x[i])))" in out.code
    assert not re.search(r"(?<!_)expf\(", out.code)


@pytest.mark.parametrize(
    "name, transform, reason",
    [
        ("block_sum.cu", BlockSize((128,)), "not written over `block`"),
        ("vadd_poor_block.cu", BlockSize((32,)), "already 32"),
        ("transpose.cu", BlockSize((256,)), "2-D blocks"),
        ("matmul.cu", Vectorize(16), "not `if (col < N) ...`"),
        ("block_scan.cu", GridStride(2), "no `i = blockIdx.x * blockDim.x + threadIdx.x` index"),
        ("layernorm.cu", Vectorize(16), "loops over memory (a row per element)"),
        ("matvec.cu", Vectorize(8), "packs would serialise rows"),
        ("vadd_poor_block.cu", WarpReduction(), "no `for (s = ..."),
        ("matmul.cu", TRANSPOSE, "not one `out[...] = in[...];` without loops"),
        ("vadd_poor_block.cu", TRANSPOSE, "no 2-D index pair (or 1-D index split"),
        ("vadd_poor_block.cu", FastMath(), "no single-precision math"),
        ("vadd_poor_block.cu", Unroll(4), "no `for` loop"),
        ("row_max.cu", ReadOnlyLoads(), "no plain loads"),
        ("scatter_add.cu", SharedHistogram(), "no constant size"),
        ("vadd_poor_block.cu", SharedHistogram(), "no `atomicAdd(&H[k], v)`"),
        ("matvec.cu", tiled(), "x does not walk one global thread index"),
        ("transpose.cu", tiled(), "not one loop over k"),
        ("block_sum.cu", tiled(), "already uses shared memory"),
    ],
)
def test_not_applicable_says_why(name: str, transform: Transform, reason: str) -> None:
    out = transform.apply(subject(target(name)))
    assert isinstance(out, NotApplicable)
    assert reason in out.reason


def test_row_parallel_strides_a_grid_stride_loop_over_the_rows_by_the_grid() -> None:
    """A grid-stride loop over the rows (``r += blockDim.x * gridDim.x``) keeps striding by the
    grid's rows: a warp (or block) per row, each taking every grid-th row; a loop that strides by
    the block alone is no grid-stride loop over the rows and is refused."""
    warp = rewrite(case("row_grid_stride.cu:row_mean_strided"), Apply(RowParallel(), Rows("warp", 128)))
    assert (
        "(blockIdx.x * blockDim.x + threadIdx.x) / 32; r < rows; r += blockDim.x / 32 * gridDim.x"
        in warp.code
    )
    block = rewrite(case("row_grid_stride.cu:row_max_strided"), Apply(RowParallel(), Rows("block", 256)))
    assert "r = blockIdx.x; r < rows; r += gridDim.x" in block.code
    refused = Apply(RowParallel(), Rows("warp", 128)).apply(
        subject(case("row_grid_stride.cu:row_sum_block_stride"))
    )
    assert isinstance(refused, NotApplicable)
    assert "nor a grid-stride loop over the rows" in refused.reason


def test_edge_forms() -> None:
    """Templated kernels, `size_t` indices, existing launch bounds, bodies touching threadIdx."""
    t = target("edge_forms.cu", "scale", DATA)
    out = rewrite(t, Vectorize(16), RestrictConst())
    compiles(t, out.code)
    assert "const size_t i = (size_t)(v * 4 + k);" in out.code  # `i` is used in the body
    bounded = subject(target("edge_forms.cu", "bounded", DATA))
    assert isinstance(LaunchBounds().apply(bounded), NotApplicable)
    assert isinstance(BlockSize((128,)).apply(bounded), NotApplicable)
    lane = subject(target("edge_forms.cu", "lane_id", DATA))
    out2 = Vectorize(16).apply(lane)
    assert isinstance(out2, NotApplicable) and "thread's position" in out2.reason


def test_apply_all_names_the_transformation_that_failed() -> None:
    out = apply_all(subject(target("block_sum.cu")), (RestrictConst(), Vectorize(16)))
    assert isinstance(out, NotApplicable) and out.reason.startswith("Vectorize:")
    ok = apply_all(subject(target("vadd_poor_block.cu")), (Vectorize(16), BlockSize((128,))))
    assert isinstance(ok, Subject)
    assert ok.launch == loop.LaunchChange(grid="cdiv(n, block * 4)", block="128")
    assert len(ok.applied) == 2
    assert isinstance(Transformed("x", "y"), Transformed)


# ------------------------------------------------------------------------------------------ GPU


def assert_all_verified(result: EvalResult, name: str) -> None:
    """The original and every candidate of ``result`` verified (the compile log where one did not)."""
    assert result.baseline.status is Status.OK, (name, result.baseline.message)
    for c in result.candidates:
        assert c.status is Status.OK, (name, c.candidate_id, c.status, c.message, c.compile_log[:2000])


@pytest.mark.gpu
def test_every_rewrite_is_equivalent_on_the_gpu() -> None:
    from sandbox.local import LocalExecutor

    by_file: dict[str, list[tuple[str, tuple[Transform, ...]]]] = {}
    for i, (name, transforms) in enumerate(CASES):
        by_file.setdefault(name, []).append((f"case{i}", transforms))
    with LocalExecutor() as executor:
        for name, cases in by_file.items():
            t = case(name)
            candidates = []
            for cid, transforms in cases:
                out = rewrite(t, *transforms)
                launches = None
                if (out.launch.grid or out.launch.block) and t.relaunch is not None:
                    *verify, _ = t.relaunch(out.launch)  # the last verify size stands in for the bench
                    launches = (*verify, verify[-1])
                source = dataclasses.replace(t.baseline, source=t.unit_with(out.code))
                candidates.append(Candidate(cid, source, launches))
            request = EvalRequest(
                id=f"transforms-{name}",
                baseline=t.baseline,
                candidates=tuple(candidates),
                verify_problems=t.verify_problems,
                bench_problem=t.verify_problems[-1],  # verify only: the benchmark size is not needed
                seeds=(11, 12),
                tolerance=t.tolerance,
                options=EvalOptions(time=False),
            )
            assert_all_verified(executor.evaluate(request), name)


@pytest.mark.gpu
def test_every_tile_of_the_tiled_dot_product_is_equivalent_on_the_gpu() -> None:
    """Every tile shape of the pass on every dot-product kernel (and the k-major, 64-bit-index
    form): verified against the original at the spec's odd verify sizes (edge tiles, the partial
    K tile, misaligned rows), whole aligned tiles (the vector path) and tiles above a causal
    diagonal (attention_scores at t=128 with 64x64 tiles)."""
    from sandbox.local import LocalExecutor

    with LocalExecutor() as executor:
        for name in (*TILED, "dot_forms.cu"):
            t = target(name, folder=DATA if name == "dot_forms.cu" else KERNELS)
            assert t.relaunch is not None
            candidates = []
            for tile in TiledDot.space:
                assert isinstance(tile, Tile)
                out = rewrite(t, Apply(TiledDot(), tile))
                *verify, _ = t.relaunch(out.launch)
                source = dataclasses.replace(t.baseline, source=t.unit_with(out.code))
                candidates.append(
                    Candidate(
                        f"{tile.bm}x{tile.bn}x{tile.bk}{'' if tile.staged else '-direct'}",
                        source,
                        (*verify, verify[-1]),
                    )
                )
            request = EvalRequest(
                id=f"tiled-dot-{name}",
                baseline=t.baseline,
                candidates=tuple(candidates),
                verify_problems=t.verify_problems,
                bench_problem=t.verify_problems[-1],
                seeds=(5, 6),
                tolerance=t.tolerance,
                options=EvalOptions(time=False),
            )
            assert_all_verified(executor.evaluate(request), name)


# ------------------------------------------------------------------------------ host emulation

HOST_TYPES = {
    "float32": "float",
    "float64": "double",
    "int32": "int",
    "uint32": "unsigned int",
    "int64": "long long",
    "uint64": "unsigned long long",
    "int8": "signed char",
    "uint8": "unsigned char",
    "float16": "__half",
    "bfloat16": "__nv_bfloat16",
    "bool": "bool",
}
# outputs compared exactly by the host emulation: any difference is an infinite one
EXACT = frozenset(d for d in HOST_TYPES if d.startswith(("int", "uint", "bool")))
# (file, transforms): rewrites whose outputs the host emulation (tests/data/transforms/host_cuda.h) compares
HOST_CASES: list[tuple[str, tuple[Transform, ...]]] = [
    (
        "vadd_poor_block.cu",
        (Vectorize(16), RestrictConst(), ReadOnlyLoads(), BlockSize((256,)), LaunchBounds()),
    ),
    ("vadd_poor_block.cu", (Vectorize(8, 4), BlockSize((64,)))),
    ("vadd_poor_block.cu", (GridStride(4), Unroll(2))),
    ("vadd_poor_block.cu", (Vectorize(16, 1, max_blocks=3),)),
    ("bias_add.cu", (GridStride(1, max_blocks=2),)),
    ("saxpy.cu", (Vectorize(16, 2),)),
    ("gather.cu", (Vectorize(16), ReadOnlyLoads())),
    ("relu_double.cu", (Vectorize(16, 2),)),
    ("histogram.cu", (Vectorize(16),)),
    ("histogram.cu", (SharedHistogram(),)),
    ("histogram.cu", (SharedHistogram(max_blocks=3), BlockSize((64,)))),
    ("scatter_add.cu", (Vectorize(8),)),
    ("bias_add.cu", (Vectorize(16, 4), BlockSize((128,)))),
    ("sigmoid.cu", (FastMath(), Vectorize(16))),
    ("gelu.cu", (Vectorize(16, 2),)),
    ("matvec.cu", (GridStride(2), Unroll(4))),
    ("softmax.cu", (GridStride(2), FastMath())),
    ("layernorm.cu", (GridStride(4), Unroll(8), RestrictConst())),
    ("edge_forms.cu", (Vectorize(16),)),
    ("block_sum.cu", (WarpReduction(), RestrictConst())),
    ("row_max.cu", (WarpReduction(), Unroll(4))),
    ("transpose.cu", (TRANSPOSE, ReadOnlyLoads())),
    ("transpose_1d.cu", (TRANSPOSE,)),
    ("block_scan.cu", (Unroll(8), LaunchBounds())),
    ("matmul.cu", (tiled(),)),
    ("matmul.cu", (tiled(64, 64, 8, 4, 4), RestrictConst(), ReadOnlyLoads())),
    ("matmul_bias.cu", (tiled(),)),
    ("matmul_bias.cu", (tiled(128, 64, 16, 8, 4),)),
    ("sgemm.cu", (tiled(),)),
    ("sgemm.cu", (tiled(64, 64, 8, 4, 4),)),
    ("attention_scores.cu", (tiled(),)),
    ("attention_scores.cu", (tiled(128, 64, 16, 8, 4),)),
    ("attention_scores.cu", (tiled(64, 64, 8, 4, 4),)),  # t=128: a tile above the diagonal is skipped
    ("matmul.cu", (tiled(64, 64, 16, 4, 4),)),
    ("sgemm.cu", (tiled(128, 128, 16, 8, 8),)),
    ("sgemm.cu", (tiled(128, 128, 8, 8, 8, False),)),
    ("attention_scores.cu", (tiled(64, 64, 16, 4, 4),)),
    ("dot_forms.cu", (tiled(),)),
    ("dot_forms.cu", (tiled(64, 64, 8, 4, 4),)),
    *(
        (name, (Apply(RowParallel(), rows),))
        for name in ROWS
        for rows in (Rows("warp", 128), Rows("block", 128), Rows("warp", 128, 4), Rows("block", 128, 4))
    ),
    ("row_forms.cu", (Apply(RowParallel(), Rows("warp", 128)),)),
    ("row_forms.cu", (Apply(RowParallel(), Rows("block", 128)), RestrictConst())),
    ("row_forms.cu", (Apply(RowParallel(), Rows("warp", 128, 4)),)),
    ("row_forms.cu", (Apply(RowParallel(), Rows("block", 128, 4)),)),
    ("row_batched.cu", (Apply(RowParallel(), Rows("warp", 128)),)),
    ("row_batched.cu", (Apply(RowParallel(), Rows("block", 256)),)),
    ("row_batched.cu", (Apply(RowParallel(), Rows("block", 128, 4)),)),
    ("row_atomic.cu", (Apply(RowParallel(), Rows("warp", 128)),)),
    ("row_atomic.cu", (Apply(RowParallel(), Rows("block", 128, 4)),)),
    *(
        (f"row_grid_stride.cu:{k}", (Apply(RowParallel(), rows),))
        for k in ("row_mean_strided", "row_max_strided")
        for rows in (Rows("warp", 128), Rows("block", 128), Rows("block", 256))
    ),
    ("reduce_interleaved.cu", (SHUFFLED,)),
    ("reduce_interleaved.cu", (Apply(SameLayoutReduction(), "sequential"),)),
    *NARROW,
    ("row_max.cu", (Apply(StridedRowVectors(), 16),)),
]


HOST_DYNAMIC_SHARED = 16384  # elements of an `extern __shared__ T x[]` array in host emulation


def _host_unit(source: str, namespace: str) -> str:
    body = "\n".join(
        line for line in _host_source(source).splitlines() if not line.lstrip().startswith("#include")
    )
    return f"namespace {namespace} {{\n{body}\n}}\n"


def _host_source(source: str) -> str:
    """The unit as the host emulation declares it inside a namespace of its own:
    ``extern __shared__ T x[];`` (dynamic shared memory, sized by the launch) as a block-shared
    array of :data:`HOST_DYNAMIC_SHARED` elements, and ``extern "C"`` linkage dropped (on the GPU
    each unit is its own module; on the host the original and the rewrite share one program, and
    two C functions of one name in two namespaces are one symbol)."""
    doc = Document(source)
    edits: list[tuple[int, int, str]] = []
    stack = [doc.tree.root_node]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type == "linkage_specification":
            body = n.child_by_field_name("body")
            if body is None:
                continue
            edits.append((n.start_byte, body.start_byte, ""))
            if body.type == "declaration_list":  # extern "C" { ... }: keep what is between the braces
                for brace in body.children:
                    if brace.type in ("{", "}"):
                        edits.append((brace.start_byte, brace.end_byte, ""))
            continue
        if n.type != "declaration":
            continue
        words = [doc.node_text(c) for c in n.children]
        if "extern" not in words or "__shared__" not in words:
            continue
        text = doc.node_text(n).replace("extern", "", 1).replace("[]", f"[{HOST_DYNAMIC_SHARED}]")
        edits.append((n.start_byte, n.end_byte, text))
    data = source.encode()
    for start, end, text in sorted(edits, reverse=True):
        data = data[:start] + text.encode() + data[end:]
    return data.decode()


def _host_value(dtype: str, i: str, dist_kind: str, low: float, high: float, value: float) -> str:
    t = HOST_TYPES[dtype]
    if dist_kind == "const":
        return f"({t})({value!r})"
    if dist_kind == "randint" or not dtypes.is_float(dtype):
        lo, span = int(low), max(1, int(high - low))
        return f"({t})({lo} + ({i} * 7919 + 13) % {span})"
    return f"({t})({low!r} + ({high - low!r}) * (double)(({i} * 7919 + 13) % 1000) / 1000.0)"


def host_program(t: Target, out: Subject | Proposal) -> str:
    """A C++ program that runs the original and the rewrite on every verify problem, twice: with
    the rewrite's arrays aligned (its vector path) and shifted by one element (its scalar path),
    and prints the largest difference of any output (``inf`` where an integer output differs).
    A :class:`Proposal` with its own ``unit`` and ``kernel`` (an expert kernel, ``compare``'s
    candidate) runs as that kernel of that unit."""
    kernel = t.kernel  # with its template arguments, if any
    unit = out.unit if isinstance(out, Proposal) and out.unit else t.unit_with(out.code)
    cand_kernel = out.kernel if isinstance(out, Proposal) and out.kernel else kernel
    lines = ['#include "host_cuda.h"', _host_unit(t.baseline.source, "orig")]
    lines += [_host_unit(unit, "cand"), "int main() {", "    double worst = 0;"]
    change = out.launch
    launches = (
        t.relaunch(change) if change is not None and (change.grid or change.block) and t.relaunch else None
    )
    for misalign, (k, p) in itertools.product((0, 1), enumerate(t.verify_problems)):
        new = launches[k] if launches else p.launch
        lines.append("    {")
        call_o, call_c = [], []
        for a in p.args:
            ty = HOST_TYPES[a.dtype]
            if a.role == "scalar":
                call_o.append(f"({ty})({a.value!r})")
                call_c.append(f"({ty})({a.value!r})")
                continue
            n = a.count
            init = _host_value(a.dtype, "i", a.dist.kind, a.dist.low, a.dist.high, a.dist.value)
            poison = "(" + ty + ")(-12345)" if a.role == "out" else init
            lines += [
                f"        static {ty} {a.name}_o[{n}], {a.name}_c[{n + misalign}];",
                f"        for (long long i = 0; i < {n}; ++i) {{ {a.name}_o[i] = {poison}; {a.name}_c[i + {misalign}] = {poison}; }}",
            ]
            call_o.append(f"{a.name}_o")
            call_c.append(f"{a.name}_c + {misalign}")
        for c in p.constants:  # named as C++ names it (``mask<float>``, ``ns::c``)
            d = c.dist
            init = (
                f"{d.source}_o[i]"
                if d.kind == "copy"
                else _host_value(c.dtype, "i", d.kind, d.low, d.high, d.value)
            )
            lines.append(
                f"        for (long long i = 0; i < {c.count}; ++i) orig::{c.name}[i] = cand::{c.name}[i] = {init};"
            )
        g, b, g2, b2 = p.launch.grid, p.launch.block, new.grid, new.block
        lines.append(
            f"        {{ using namespace orig; launch({kernel}, dim3{{{g[0]}, {g[1]}, {g[2]}}}, dim3{{{b[0]}, {b[1]}, {b[2]}}}, {', '.join(call_o)}); }}"
        )
        lines.append(
            f"        {{ using namespace cand; launch({cand_kernel}, dim3{{{g2[0]}, {g2[1]}, {g2[2]}}}, dim3{{{b2[0]}, {b2[1]}, {b2[2]}}}, {', '.join(call_c)}); }}"
        )
        for a in p.args:
            if a.role in ("out", "inout") and a.dtype in EXACT:  # integers must match exactly
                lines.append(
                    f"        for (long long i = 0; i < {a.count}; ++i) if ({a.name}_o[i] != {a.name}_c[i + {misalign}]) worst = HUGE_VAL;"
                )
            elif a.role in ("out", "inout"):
                lines.append(
                    f"        for (long long i = 0; i < {a.count}; ++i) {{ double o = {a.name}_o[i], c = {a.name}_c[i + {misalign}], d = o == c || (o != o && c != c) ? 0.0 : std::fabs(o - c); if (!(d <= worst)) worst = d != d ? 1e30 : d; }}"
                )
        lines.append("    }")
    lines += ['    printf("%g\\n", worst);', "    return 0;", "}"]
    return "\n".join(lines) + "\n"


@pytest.mark.slow  # a g++ build per case
@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ for the host emulation")
@pytest.mark.parametrize("name, transforms", HOST_CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_rewrite_computes_the_same_outputs_in_host_emulation(
    name: str, transforms: tuple[Transform, ...], tmp_path: Path
) -> None:
    """Rewrites run on the CPU (a fiber per CUDA thread, tests/data/transforms/host_cuda.h)
    give the original's outputs, with aligned arrays (vector path) and misaligned ones (scalar path);
    sums may differ in the last bits where a reduction changes the order of additions."""
    t = case(name)
    out = rewrite(t, *transforms)
    src = tmp_path / "emulate.cpp"
    program = host_program(t, out)
    src.write_text(program)
    threads = ["-DHOST_CUDA_THREADS"] if re.search(r"__syncthreads|__shfl", program) else []
    exe = tmp_path / "emulate"
    build = subprocess.run(
        [
            "g++",
            "-std=c++20",
            "-pthread",
            "-O0",
            "-fno-strict-aliasing",
            "-ffp-contract=off",
            "-w",
            f"-I{DATA}",
            *threads,
            str(src),
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stderr[:3000]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert float(run.stdout) <= (1e-5 if t.tolerance else 1e-6), f"outputs differ by {run.stdout.strip()}"


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ for the host emulation")
def test_host_emulation_defines_what_the_device_runtime_defines(tmp_path: Path) -> None:
    """Real kernels' spellings build and run on the host: a `bool` and a `char*` parameter, NULL
    for a pointer, unqualified `max`/`min`, a variable-template `__constant__`, and an
    `extern "C"` kernel named like a C symbol, twice in one program (original and rewrite)."""
    cu = """
#include <cuda_runtime.h>
template <typename T> __constant__ T w[4];
extern "C" {
__global__ void add(int n, const char* v, float* skip, float* out, bool neg) {
    int i = threadIdx.x;
    if (i < n) out[i] = max(0, (int)v[i]) + min(w<float>[i % 4], 2.5f) * (neg ? -1 : 1) + (skip == 0);
}
}
"""
    body = [_host_unit(cu, "orig"), _host_unit(cu, "cand")]
    main = """int main() {
    signed char v[4] = {-3, 1, 2, 3};
    float out[4];
    for (int i = 0; i < 4; ++i) orig::w<float>[i] = cand::w<float>[i] = (float)i;
    launch(orig::add, dim3{1, 1, 1}, dim3{4, 1, 1}, 4, v, (unsigned long long)(0), out, (bool)(1.0));
    printf("%g %g %g %g\\n", out[0], out[1], out[2], out[3]);
    return 0;
}
"""
    src = tmp_path / "emulate.cpp"
    src.write_text('#include "host_cuda.h"\n' + "\n".join(body) + main)
    exe = tmp_path / "emulate"
    build = subprocess.run(
        ["g++", "-std=c++20", "-pthread", "-O0", "-w", f"-I{DATA}", str(src), "-o", str(exe)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stderr[:3000]
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    # max(0, v[i]) - min(w[i], 2.5) + 1, as skip is NULL
    assert run.stdout.split() == ["1", "1", "1", "1.5"]


def _emulated(tmp_path: Path, program: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    """``program`` built with the host emulation's threads (fibers) and run."""
    src = tmp_path / "emulate.cpp"
    src.write_text('#include "host_cuda.h"\n' + program)
    exe = tmp_path / "emulate"
    build = subprocess.run(
        ["g++", "-std=c++20", "-O1", "-w", "-DHOST_CUDA_THREADS", f"-I{DATA}", str(src), "-o", str(exe)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert build.returncode == 0, build.stderr[:3000]
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ for the host emulation")
def test_host_emulation_barriers_order_the_threads_and_a_missing_one_shows(tmp_path: Path) -> None:
    """Each thread of a block runs alone up to its next barrier: behind ``__syncthreads`` every
    thread reads what the others wrote and shuffles exchange through the warp; without the barrier
    a read of a later thread's element finds it not yet written, so a rewrite that drops a barrier
    computes other outputs."""
    run = _emulated(
        tmp_path,
        """
__global__ void flip(int* out, bool sync) {
    __shared__ int s[64];
    const int t = threadIdx.x;
    s[t] = t + 1;
    if (sync) __syncthreads();
    int v = s[63 - t];
    v += __shfl_down_sync(0xffffffffu, v, 1);  // lane 31 keeps its own
    out[t] = v;
    __syncthreads();
    s[t] = 0;  // the next block's threads start from zeros
}
int main() {
    static int out[64];
    launch(flip, dim3{1, 1, 1}, dim3{64, 1, 1}, out, true);
    printf("%d %d %d ", out[0], out[31], out[63]);
    launch(flip, dim3{1, 1, 1}, dim3{64, 1, 1}, out, false);
    printf("%d %d\\n", out[0], out[63]);
    return 0;
}
""",
    )
    assert run.returncode == 0, run.stderr
    # with the barrier: s[63 - t] = 64 - t plus the next lane's 63 - t; lane 31 gets its own 33 back
    # (66), thread 63 reads s[0] = 1 (2); without it thread 0 reads s[63] before thread 63 has
    # written it (0, and thread 1's s[62] too), thread 63 still finds s[0] written (2)
    assert run.stdout.split() == ["127", "66", "2", "0", "2"]


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ for the host emulation")
def test_host_emulation_stops_at_a_barrier_some_threads_never_reach(tmp_path: Path) -> None:
    run = _emulated(
        tmp_path,
        """
__global__ void early(int* out) {
    if (threadIdx.x < 3) return;
    __syncthreads();
    out[threadIdx.x] = 1;
}
int main() {
    static int out[64];
    launch(early, dim3{1, 1, 1}, dim3{64, 1, 1}, out);
    return 0;
}
""",
        timeout=30,
    )
    assert run.returncode != 0 and "never reach" in run.stderr


@pytest.mark.slow  # seconds on an idle machine, a minute on a loaded one
@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ for the host emulation")
def test_host_emulation_runs_four_million_threads_with_barriers(tmp_path: Path) -> None:
    """A 2048x2048 transpose through a shared tile (4096 blocks of 32x32 threads, two barriers
    each: the corpus' naive transpose at its one size), well inside the corpus check's time (a
    std::thread per CUDA thread took over ten minutes here)."""
    run = _emulated(
        tmp_path,
        """
__global__ void tiled(const int* in, int* out, int n) {
    __shared__ int tile[32][33];
    int x = blockIdx.x * 32 + threadIdx.x, y = blockIdx.y * 32 + threadIdx.y;
    tile[threadIdx.y][threadIdx.x] = in[y * n + x];
    __syncthreads();
    x = blockIdx.y * 32 + threadIdx.x, y = blockIdx.x * 32 + threadIdx.y;
    out[y * n + x] = tile[threadIdx.x][threadIdx.y];
    __syncthreads();
}
static int in[2048 * 2048], out[2048 * 2048];
int main() {
    for (int i = 0; i < 2048 * 2048; ++i) in[i] = i;
    launch(tiled, dim3{64, 64, 1}, dim3{32, 32, 1}, (const int*)in, out, 2048);
    long long wrong = 0;
    for (int y = 0; y < 2048; ++y)
        for (int x = 0; x < 2048; ++x) wrong += out[y * 2048 + x] != in[x * 2048 + y];
    printf("%lld\\n", wrong);
    return 0;
}
""",
        timeout=300,
    )
    assert run.returncode == 0 and run.stdout.split() == ["0"], run.stderr
