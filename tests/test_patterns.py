"""Declarative patterns over the kernel view (engine/patterns.py): spellings that the
front end and the view make equal match the same pattern; shapes that differ do not."""

from __future__ import annotations

import pytest

from cudasrc import specs as spec_mod
from cudasrc.source import Document
from engine import Subject
from engine.patterns import (
    ANY,
    BARRIER,
    Assign,
    Bin,
    Block,
    For,
    If,
    Lit,
    Poly,
    Stmt,
    Sub,
    Var,
    find,
)
from engine.same_layout import INTERLEAVED
from engine.view import KernelView, statements
from engine.warp_reduction import TREE

HEAD = """// @cuda-agent sizes n=1024
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x inout float[n]
// @cuda-agent arg n = n
"""


def view(body: str, prelude: str = "") -> KernelView:
    doc = Document(f"{prelude}{HEAD}__global__ void k(float* x, int n) {{\n{body}\n}}\n")
    kernel = doc.kernels[-1]
    spec, errors = spec_mod.parse(kernel)
    assert spec is not None and not errors, errors
    return Subject(doc.text_in(kernel.span), spec, context=doc.text).normalized.view


TREE_LOOP = """    __shared__ float s_[256];
    unsigned tid = threadIdx.x;
    s_[tid] = x[blockIdx.x * 256 + tid];
    __syncthreads();
    {loop}
    if (tid == 0) x[blockIdx.x] = s_[0];"""


@pytest.mark.parametrize(
    "loop",
    [
        "for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) s_[tid] += s_[tid + s]; __syncthreads(); }",
        "for (int s = blockDim.x / 2; 0 < s; s = s / 2) { if (s > (tid)) { s_[tid] = s_[s + tid] + s_[tid]; } __syncthreads(); }",
        "int s; for (s = 128; s > 0; s /= 2) { // halve\n if (threadIdx.x < s) s_[tid] += s_[tid + s];\n __syncthreads(); }",
    ],
)
def test_the_tree_pattern_matches_every_spelling_and_captures_its_parts(loop: str) -> None:
    v = view(TREE_LOOP.format(loop=loop))
    caps = find(v, TREE)
    assert caps is not None
    assert caps["loop"].var == caps["s"] == "s"
    assert v.poly(caps["tid"]) == {("threadIdx.x",): 1}
    assert caps["step"].type == "expression_statement" and "s_[" in v.text(caps["step"])


@pytest.mark.parametrize(
    "loop",
    [
        "for (unsigned s = blockDim.x / 2; s > 1; s >>= 1) { if (tid < s) s_[tid] += s_[tid + s]; __syncthreads(); }",
        "for (unsigned s = blockDim.x / 2; s > 0; s >>= 2) { if (tid < s) s_[tid] += s_[tid + s]; __syncthreads(); }",
        "for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) s_[tid] += s_[tid + s]; }",
        "for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) { if (tid <= s) s_[tid] += s_[tid + s]; __syncthreads(); }",
        "for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) { if (tid < s) s_[tid] += s_[tid + s]; else s_[tid] = 0; __syncthreads(); }",
    ],
)
def test_the_tree_pattern_refuses_other_shapes(loop: str) -> None:
    assert find(view(TREE_LOOP.format(loop=loop)), TREE) is None


@pytest.mark.parametrize(
    "cond, every, selects",
    [
        ("0 == (tid % (s * 2))", 2, True),
        ("(tid & (2 * s - 1)) == 0", 2, True),
        ("((blockIdx.x * blockDim.x + threadIdx.x) % (s << 1)) == 0", 2, True),  # a block is a multiple of 2s
        ("((blockIdx.x * blockDim.x + threadIdx.x + 1) % (2 * s)) == 0", 2, False),
        ("tid % (s * 4) == 0", 2, False),
        ("tid % (s * 2) == 1", 2, False),
        ("blockIdx.x * blockDim.x < n", None, True),  # every block starts inside the array
        ("blockIdx.x * blockDim.x + s < n", None, False),  # not at the spec's verify sizes (n = 97)
        ("blockIdx.x * blockDim.x + tid + s < n", None, False),
    ],
)
def test_the_interleaved_step_is_judged_by_the_threads_its_test_selects(
    cond: str, every: int | None, selects: bool
) -> None:
    loop = (
        f"for (int s = 1; s < blockDim.x; s <<= 1) {{ if ({cond}) s_[tid] += s_[tid + s]; __syncthreads(); }}"
    )
    v = view(TREE_LOOP.format(loop=loop))
    caps = find(v, INTERLEAVED)
    assert caps is not None and caps["s"] == "s"
    guard = statements(caps["body"])[0]
    clause = guard.child_by_field_name("condition")
    assert clause is not None
    answer = v.maps.selects(guard, clause.child_by_field_name("value"), caps["loop"], every)
    assert (answer is True) == selects, answer


def test_var_unifies_and_poly_sees_through_locals_macros_and_captured_atoms() -> None:
    v = view(
        "    int i = blockIdx.x * TILE + threadIdx.x;\n    for (int j = 0; j < n; j++) x[i] = x[i] + x[j];",
        prelude="#define TILE 256\n",
    )
    same = For("j", start=Poly({}), cond=Bin("<", Var("j"), Var("n")), update=ANY, body=ANY)
    assert find(v, same) is not None
    assert find(v, For("j", cond=Bin("<", Var("j"), Var("j")))) is None  # j and n differ
    body = Block(
        Stmt(Assign("=", ANY @ "dst", Bin("+", ANY, Sub(Var("a"), Poly({("$j",): 1}, free=("j",))) @ "far")))
    )
    caps = find(v, For("j", body=body))
    assert caps is not None and v.text(caps["far"]) == "x[j]" and v.text(caps["dst"]) == "x[i]"
    assert caps["a"] == "x"
    index = Poly({("blockDim.x", "blockIdx.x"): 1, ("threadIdx.x",): 1})
    decl = v.locals["i"].value
    assert index.match(v, decl, {}) is not None  # TILE is the block's width: blockDim.x
    assert Lit("blockDim.x").match(v, decl, {}) is None


def test_if_without_else_and_barrier_in_another_spelling() -> None:
    v = view(
        "    for (int s = 1; s < n; s *= 2) { if (threadIdx.x < s) x[threadIdx.x] += 1.0f; __syncthreads(); }"
    )
    shape = For("s", body=Block(If(ANY, then=ANY), BARRIER))
    assert find(v, shape) is not None
    assert find(v, For("s", body=Block(If(ANY, then=ANY, orelse=ANY), BARRIER))) is None
    assert find(v, For("s", body=Block(BARRIER, If(ANY, then=ANY)))) is None
