"""The kernel view (canonical accesses, aliases, reductions, uniformity), the emitter, and the
row-parallel pass's matches and refusals (its outputs are checked in tests/test_transforms.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from agent.builtin import BuiltinProposer
from cudasrc import specs as spec_mod
from cudasrc.source import Document
from engine import NotApplicable, Subject
from engine.compose import Chain
from engine.passes import Apply, Emitter
from engine.registry import candidates
from engine.row_parallel import RowParallel, Rows, StridedRowVectors
from engine.same_layout import SameLayoutReduction
from engine.tiled_transpose import TiledTranspose
from engine.view import global_index
from engine.warp_atomic import WarpAtomic
from engine.warp_reduction import WarpReduction

KERNELS = Path(__file__).parent.parent / "bench" / "kernels"


def subject_of(name: str, code: str | None = None) -> Subject:
    doc = Document.from_file(KERNELS / name)
    spec, errors = spec_mod.parse(doc.kernels[0])
    assert spec is not None and not errors
    return Subject(code if code is not None else doc.text_in(doc.kernels[0].span), spec)


def test_accesses_are_canonical_through_casts_operand_order_and_aliases() -> None:
    code = (
        "__global__ void softmax(const float* x, float* y, int rows, int cols) {\n"
        "    int r = threadIdx.x + blockDim.x * blockIdx.x;\n"
        "    const float* in = x + (size_t)r * cols;\n"
        "    float a = 0.0f;\n"
        "    for (int j = 0; j < cols; ++j) a += in[j] + x[j + cols * r] + x[(size_t)r * cols + j];\n"
        "    y[r] = a;\n"
        "}\n"
    )
    view = subject_of("softmax.cu", code).view
    reads = [a for a in view.accesses if a.array == "x"]
    assert len(reads) == 3 and len({tuple(sorted(a.index.items())) for a in reads if a.index}) == 1
    assert view.aliases["in"][0] == "x"
    (row,) = [
        loc
        for loc in view.locals.values()
        if loc.value is not None and view.poly(loc.value) == global_index("x")
    ]
    assert row.name == "r"
    assert (
        "r" in view.thread_dependent and "in" in view.thread_dependent and "cols" not in view.thread_dependent
    )
    (store,) = [a for a in view.accesses if a.written]
    assert store.array == "y" and store.loop is None


@pytest.mark.parametrize(
    "step, kind, combine",
    [
        ("a += in[j];", "sum", "+"),
        ("a -= in[j];", "sum", "+"),
        ("a = in[j] + a;", "sum", "+"),
        ("a *= in[j];", "prod", "*"),
        ("a = fmaxf(in[j], a);", "max", "fmaxf"),
        ("a = min(a, in[j]);", "min", "min"),
        ("if (in[j] > a) { a = in[j]; }", "max", ">"),
        ("if (a > in[j]) a = in[j];", "min", "<"),
    ],
)
def test_loop_carried_reductions_are_recognised(step: str, kind: str, combine: str) -> None:
    code = (
        "__global__ void softmax(const float* in, float* y, int rows, int cols) {\n"
        f"    double a = 0.0;\n    for (int j = 0; j < cols; j++) {{ {step} }}\n    y[0] = a;\n}}\n"
    )
    (loop,) = subject_of("softmax.cu", code).view.loops
    assert loop.var == "j" and loop.op == "<" and loop.step == 1
    (carried,) = loop.carried
    assert carried.reduction is not None, carried.reason
    assert (carried.reduction.kind, carried.reduction.combine) == (kind, combine)


@pytest.mark.parametrize(
    "step, reason",
    [
        ("a += in[j]; y[j] = a;", "read inside the loop"),
        ("a = in[j];", "not a reduction step"),
        ("a += in[j]; a = fmaxf(a, 1.0f);", "more than one way"),
        ("a = a * a + in[j];", "not a reduction step"),
    ],
)
def test_other_loop_carried_dependencies_are_not_reductions(step: str, reason: str) -> None:
    code = (
        "__global__ void softmax(const float* in, float* y, int rows, int cols) {\n"
        f"    float a = 0.0f;\n    for (int j = 0; j < cols; j++) {{ {step} }}\n    y[0] = a;\n}}\n"
    )
    (loop,) = subject_of("softmax.cu", code).view.loops
    (carried,) = loop.carried
    assert carried.reduction is None and reason in carried.reason


ROW = (
    "__global__ void softmax(const float* x, float* y, int rows, int cols) {{\n"
    "    int r = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (r >= rows) return;\n"
    "    float s = 0.0f;\n"
    "{body}\n"
    "}}\n"
)


@pytest.mark.parametrize(
    "body, reason",
    [
        ("    for (int j = 0; j < cols; ++j) { s += x[r * cols + j]; y[r * cols + j] = s; }", "read inside"),
        ("    for (int j = 0; j < cols; ++j) s = x[r * cols + j];", "not a reduction step"),
        (
            "    for (int j = 1; j < cols; ++j) y[r * cols + j] = y[r * cols + j - 1] + 1.0f;",
            "other elements",
        ),
        ("    for (int j = 0; j < cols; ++j) y[r * cols] += x[j];", "one element per `j`"),
        ("    for (int j = 0; j < cols; j += 2) s += x[j];", "is not `for (j = start"),
        ("    for (int j = 0; j < cols; ++j) { if (x[j] < 0) break; s += x[j]; }", "leaves the loop early"),
        ("    float t[4];\n    for (int j = 0; j < 4; ++j) t[j] = x[j];\n    y[r] = t[0];", "local array"),
        ("    for (int j = 0; j < cols; ++j) s += x[j] * threadIdx.x;", "besides the row index"),
        ("    y[r] = s;", "no loop over the row"),
        ("    for (int j = 0; j < cols; ++j) { s += x[j]; j += 1; }", "assigns its variable"),
        ("    for (int j = 0; j < cols; ++j) atomicAdd(y, x[r * cols + j]);", "updates an array atomically"),
        (
            "    for (int j = 0; j < cols; ++j) s += x[j];\n    float old = atomicAdd(y, s);",
            "returns is used",
        ),
        (
            "    for (int j = 0; j < cols; ++j) s += x[j];\n    if (atomicAdd(y, s) > 0) s = 0;",
            "returns is used",
        ),
        (
            "    for (int j = 0; j < cols; ++j) s += x[j];\n    atomicAdd(y, s);\n    y[r] = s;",
            "`y` is used besides",
        ),
        (
            "    for (int j = 0; j < cols; ++j) s += x[j];\n    atomicAdd(&s, 1.0f);",
            "not in an array parameter",
        ),
        (
            "    for (int j = 0; j < cols; ++j) s += x[j];\n    atomicAdd(y, __shfl_xor_sync(~0u, s, 1));",
            "already uses warp shuffles",
        ),
    ],
)
def test_row_parallel_refuses_what_it_cannot_do_right(body: str, reason: str) -> None:
    out = Apply(RowParallel(), Rows("warp", 256)).apply(subject_of("softmax.cu", ROW.format(body=body)))
    assert isinstance(out, NotApplicable) and reason in out.reason, out


@pytest.mark.parametrize(
    "name, reason",
    [
        ("row_max.cu", "already uses shared memory"),
        ("matmul.cu", "launch is not 1-D blocks"),
        ("vadd_poor_block.cu", "no loop over the row"),
    ],
)
def test_row_parallel_refuses_other_kernels(name: str, reason: str) -> None:
    out = Apply(RowParallel(), Rows("warp", 256)).apply(subject_of(name))
    assert isinstance(out, NotApplicable) and reason in out.reason, out


def test_row_parallel_rewrites_a_warp_or_a_block_per_row() -> None:
    warp = Apply(RowParallel(), Rows("warp", 256)).apply(subject_of("softmax.cu"))
    assert not isinstance(warp, NotApplicable)
    assert (
        "for (int j = 1 + lane; j < cols; j += 32) m = fmaxf(m, in[j]);\n    m = warp_allreduce_fmaxf(m);"
        in warp.code
    )
    assert warp.code.count("__device__ __forceinline__ T warp_allreduce_sum(T v)") == 1
    assert warp.launch is not None and (warp.launch.grid, warp.launch.block) == (
        "cdiv(rows, block / 32)",
        "256",
    )
    block = Apply(RowParallel(), Rows("block", 512, 4)).apply(subject_of("matvec.cu"))
    assert not isinstance(block, NotApplicable)
    assert "int r = blockIdx.x;" in block.code and "acc = block_allreduce_sum(acc);" in block.code
    assert "if (lane == 0) y[r] = acc;" in block.code
    assert block.launch is not None and (block.launch.grid, block.launch.block) == ("cdiv(rows, 1)", "512")
    # the matrix row and the vector both go through float4 loads, lanes striding the vectors
    assert (
        "if (((reinterpret_cast<unsigned long long>(&A[(size_t)r * cols + 0]) | "
        "reinterpret_cast<unsigned long long>(&x[0])) % 16) == 0) {" in block.code
    )
    assert "for (long long v = lane; v < nv; v += blockDim.x) {" in block.code
    assert "acc += A_e[k] * x_e[k];" in block.code
    assert "for (int j = done + lane; j < cols; j += blockDim.x)" in block.code  # the scalar rest
    stats = Apply(RowParallel(), Rows("warp", 256)).apply(subject_of("attention_softmax.cu"))
    assert not isinstance(stats, NotApplicable)
    assert "for (int t2 = lane; t2 <= t; t2 += 32)" in stats.code  # the causal bound is kept
    assert "__syncwarp();\n        for (int t2 = lane; t2 < T; t2 += 32)" in stats.code  # reads back att


def test_row_parallel_runs_a_rows_atomic_updates_on_one_lane() -> None:
    """The row's results added atomically into grid-wide sums (HeCBench's attention_kernel1): each
    row still makes each update once, from lane 0, after the all-reduce."""
    code = ROW.format(
        body="    for (int j = 0; j < cols; ++j) s += x[(size_t)r * cols + j];\n"
        "    atomicAdd(y, __expf(s));\n    atomicAdd(&y[1 + (s > 0)], 1.0f);"
    )
    for rows, lanes in ((Rows("warp", 256), "32"), (Rows("block", 256), "blockDim.x")):
        out = Apply(RowParallel(), rows).apply(subject_of("softmax.cu", code))
        assert not isinstance(out, NotApplicable), out
        assert f"j += {lanes}) s += x[(size_t)r * cols + j];" in out.code
        assert (
            "    if (lane == 0) atomicAdd(y, __expf(s));\n    if (lane == 0) atomicAdd(&y[1 + (s > 0)], 1.0f);"
            in out.code
        )


def test_a_lane_0_write_under_an_if_with_an_else_keeps_the_else_its_own() -> None:
    code = ROW.format(
        body="    for (int j = 0; j < cols; ++j) s += x[(size_t)r * cols + j];\n"
        "    if (s > 0) y[r] = s;\n    else y[r] = 0;\n    if (s > 1) y[r + 1] = y[r];"
    )
    out = Apply(RowParallel(), Rows("warp", 256)).apply(subject_of("softmax.cu", code))
    assert not isinstance(out, NotApplicable), out
    assert "    if (s > 0) { if (lane == 0) y[r] = s; }\n    else if (lane == 0) y[r] = 0;\n" in out.code
    assert (
        "    if (s > 1) { __syncwarp(); if (lane == 0) y[r + 1] = y[r]; }" in out.code
    )  # the barrier in the branch


@pytest.mark.parametrize("vec", [1, 4])
def test_a_row_loop_under_an_unbraced_if_keeps_its_reductions_in_the_branch(vec: int) -> None:
    body = "    if (cols > 4) for (int j = 0; j < cols; ++j) s += x[(size_t)r * cols + j];\n    else s = 1.0f;\n    y[r] = s;"
    out = Apply(RowParallel(), Rows("warp", 256, vec)).apply(subject_of("softmax.cu", ROW.format(body=body)))
    assert not isinstance(out, NotApplicable)
    assert "    if (cols > 4) {\n        " in out.code
    assert "        s = warp_allreduce_sum(s);\n    }\n    else s = 1.0f;" in out.code
    assert ("; v += 32)" in out.code) == (vec == 4)


def test_emitter_names_avoid_identifiers_in_use_and_helpers_are_emitted_once() -> None:
    code = ROW.format(
        body="    int lane = 3;\n    for (int j = 0; j < cols; ++j) s += x[r * cols + j];\n    y[r] = s + lane;"
    )
    out = Apply(RowParallel(), Rows("warp", 256)).apply(subject_of("softmax.cu", code))
    assert not isinstance(out, NotApplicable)
    assert "const int ca_lane = threadIdx.x % 32;" in out.code
    e = Emitter(subject_of("softmax.cu", code).view)
    assert e.fresh("lane") == "ca_lane" and e.fresh("lane") == "ca_lane_2"
    assert e.helper("h", "int h();") == e.helper("h", "int h();") == "h" and len(e.helpers) == 1


def test_the_first_batch_holds_the_row_parallel_guess_by_row_length() -> None:
    matvec = subject_of("matvec.cu")
    long_rows = Subject(
        matvec.code, dataclasses.replace(matvec.spec, sizes={**matvec.spec.sizes, "cols": "1 << 16"})
    )
    for subject, rows in (
        (subject_of("softmax.cu"), Rows("warp", 256, 4)),
        (matvec, Rows("warp", 256, 4)),
        (long_rows, Rows("block", 256, 4)),
    ):
        proposer = BuiltinProposer()
        proposer._base = subject
        proposer._arms = {"shape": (None, *candidates()), "block": (None,), "restrict": (False, True)}
        (first,) = proposer._firsts()
        assert first.shape == Apply(RowParallel(), rows) and first.restrict, first
        assert subject.view is subject.view  # built once per subject


STRIDED = (
    "__global__ void row_max(const float* x, float* out, int rows, int cols) {{\n"
    "    __shared__ float best[256];\n"
    "    int tid = threadIdx.x;\n"
    "    const float* row = x + (size_t)blockIdx.x * cols;\n"
    "    float m = -3.402823466e38f;\n"
    "    for (int j = tid; j < cols; j += blockDim.x) {loop}\n"
    "    {store}\n"
    "    __syncthreads();\n"
    "    for (int s = blockDim.x / 2; s > 0; s >>= 1) {{\n"
    "        if (tid < s) {step}\n"
    "        __syncthreads();\n"
    "    }}\n"
    "    if (tid == 0) out[blockIdx.x] = best[{read}];\n"
    "}}\n"
)


@pytest.mark.parametrize(
    "loop, store, step, read, reason",
    [
        ("m = fmaxf(m, row[j]);", "best[tid] = m;", "best[tid] = fmaxf(best[tid], best[tid + s]);", "0", ""),
        (
            "if (row[j] > m) m = row[j];",
            "best[tid] = m;",
            "best[tid] = max(best[tid + s], best[tid]);",
            "0",
            "",
        ),
        ("m += row[j];", "best[tid] = m;", "best[tid] += best[tid + s];", "0", ""),
        ("m = fmaxf(m, row[j]);", "best[tid] = m;", "best[tid] += best[tid + s];", "0", "does not combine"),
        (
            "m = fmaxf(m, row[j]);",
            "best[tid] = m;",
            "best[tid] = fmaxf(best[tid], best[tid + s]);",
            "1",
            "not their combination",
        ),
        ("m = fmaxf(m, row[j]);", "best[tid] = m + 1.0f;", "best[tid] += best[tid + s];", "0", "stored once"),
        (
            "m = fmaxf(m, row[j]);",
            "out[tid] = m; best[tid] = m;",
            "best[tid] += best[tid + s];",
            "0",
            "stored once",
        ),
        ("m = fmaxf(m, row[j * 2]);", "best[tid] = m;", "best[tid] += best[tid + s];", "0", "not `base + j`"),
        (
            "m = fmaxf(m, x[j + tid]);",
            "best[tid] = m;",
            "best[tid] += best[tid + s];",
            "0",
            "not in a row shared",
        ),
    ],
)
def test_strided_row_vectors_need_partials_combined_by_the_same_operation(
    loop: str, store: str, step: str, read: str, reason: str
) -> None:
    """Threads stride vectors instead of elements only where the partition of the row cannot show:
    every partial goes into one shared array, combined there by the loop's own operation, and only
    the total is read."""
    code = STRIDED.format(loop=loop, store=store, step=step, read=read)
    out = Apply(StridedRowVectors(), 16).apply(subject_of("row_max.cu", code))
    if reason:
        assert isinstance(out, NotApplicable) and reason in out.reason, out
        return
    assert not isinstance(out, NotApplicable), out
    assert "for (long long v = tid; v < nv; v += blockDim.x) {" in out.code
    assert "if (((reinterpret_cast<unsigned long long>(&row[0])) % 16) == 0) {" in out.code
    assert "for (int j = done + tid; j < cols; j += blockDim.x)" in out.code  # the scalar rest


TREE = (
    "__global__ void reduce0(const float* g_idata, float* g_odata, unsigned int n) {{\n"
    "    __shared__ float sdata[256];\n"
    "    unsigned int tid = threadIdx.x;\n"
    "    sdata[tid] = g_idata[blockIdx.x * blockDim.x + tid];\n"
    "    __syncthreads();\n"
    "    for (unsigned int s = 1; s < blockDim.x; {update}) {{\n"
    "        if ({cond}) sdata[tid] = fmaxf(sdata[tid], sdata[tid + s]);\n"
    "        __syncthreads();\n"
    "    }}\n"
    "    if (tid == 0) g_odata[blockIdx.x] = sdata[{read}];\n"
    "}}\n"
)


@pytest.mark.parametrize(
    "update, cond, read, applies",
    [
        ("s *= 2", "tid % (2 * s) == 0", "0", True),
        ("s <<= 1", "0 == threadIdx.x % (s * 2)", "0", True),
        ("s *= 2", "tid % (2 * s) == 0", "tid", False),  # other partial results are read afterwards
        ("s += 1", "tid % (2 * s) == 0", "0", False),
        ("s *= 2", "tid % (4 * s) == 0", "0", False),
    ],
)
def test_same_layout_reduction_matches_interleaved_trees_only(
    update: str, cond: str, read: str, applies: bool
) -> None:
    code = TREE.format(update=update, cond=cond, read=read)
    steps = (Apply(SameLayoutReduction(), "sequential"), Apply(WarpReduction(), WarpReduction()))
    out = Chain(steps).apply(subject_of("reduce_interleaved.cu", code))
    assert isinstance(out, NotApplicable) != applies, out
    if applies:
        assert not isinstance(out, NotApplicable)
        assert "for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1)" in out.code
        assert "v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, o));" in out.code


def test_same_layout_reduction_needs_a_power_of_two_block() -> None:
    out = Apply(SameLayoutReduction(), "sequential").apply(subject_of("block_sum.cu"))
    assert isinstance(out, NotApplicable) and "no `for (s = 1" in out.reason
    odd = subject_of("reduce_interleaved.cu")
    odd = Subject(odd.code, odd.spec.__class__(**{**odd.spec.__dict__, "block": ("96",)}))
    out = Apply(SameLayoutReduction(), "sequential").apply(odd)
    assert isinstance(out, NotApplicable) and "power of two" in out.reason


ATOMIC = """// @cuda-agent sizes n=4096
// @cuda-agent launch grid=cdiv(n, {block}) block={block}
// @cuda-agent arg out inout {t}[cdiv(n, {block})] const(0)
// @cuda-agent arg x in {t}[n]
// @cuda-agent arg n = n
__global__ void total({t}* out, const {t}* x, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    {body}
}}
"""


@pytest.mark.parametrize(
    "body, block, t, reason",
    [
        ("atomicAdd(&out[0], x[i]);", 256, "float", None),
        ("atomicAdd(out + blockIdx.x, i < n ? x[i] : 0);", 128, "int", None),  # one address per block
        ("atomicAdd(&out[threadIdx.x % 4], x[i]);", 256, "float", "not one address"),
        ("if (i < n) atomicAdd(out, x[i]);", 256, "float", "inside a loop or a condition"),
        ("if (i >= n) return;\n    atomicAdd(out, x[i]);", 256, "float", "returns early"),
        ("float old = atomicAdd(out, x[i]); out[1] = old;", 256, "float", "its value is used"),
        ("atomicAdd(out, x[i]);", 96 + 16, "float", "multiple of 32"),
    ],
)
def test_warp_atomic_sums_a_warp_before_one_atomic_into_one_address(
    body: str, block: int, t: str, reason: str | None
) -> None:
    doc = Document(ATOMIC.format(body=body, block=block, t=t))
    spec, errors = spec_mod.parse(doc.kernels[0])
    assert spec is not None and not errors, errors
    out = Apply(WarpAtomic(), "warp").apply(Subject(doc.text_in(doc.kernels[0].span), spec))
    if reason is not None:
        assert isinstance(out, NotApplicable) and reason in out.reason, out
        return
    assert not isinstance(out, NotApplicable), out
    assert f"{t} v = " in out.code and "v += __shfl_down_sync(0xffffffffu, v, o);" in out.code
    assert out.code.count("atomicAdd(") == 1 and "if (threadIdx.x % 32 == 0) atomicAdd(" in out.code


def test_tiled_transpose_matches_a_1d_index_split_by_div_and_mod_in_either_operand_order() -> None:
    out = Apply(TiledTranspose(), (32, 8)).apply(subject_of("transpose_1d.cu"))
    assert not isinstance(out, NotApplicable)
    assert out.launch is not None and out.launch.grid == "(cdiv(N, 32), cdiv(N, 32))"
    assert "out[(row + j) * N + col] = tile[threadIdx.x][threadIdx.y + j];" in out.code
    swapped = (
        "__global__ void transpose(const float* in, float* out, int rows, int cols) {\n"
        "    size_t x = threadIdx.x + (size_t)blockDim.x * blockIdx.x;\n"
        "    int y = blockDim.y * blockIdx.y + threadIdx.y;\n"
        "    if (rows > 0 && y < rows && x < cols) out[rows * x + y] = in[x + cols * (size_t)y];\n"
        "}\n"
    )
    refused = Apply(TiledTranspose(), (32, 8)).apply(subject_of("transpose.cu", swapped))
    assert isinstance(refused, NotApplicable) and "`rows > 0`" not in refused.reason  # `>` is no bound
    ok = Apply(TiledTranspose(), (32, 8)).apply(
        subject_of("transpose.cu", swapped.replace("rows > 0 && ", ""))
    )
    assert not isinstance(ok, NotApplicable), ok
