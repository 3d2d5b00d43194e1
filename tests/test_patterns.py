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
from engine.same_layout import INTERLEAVED, MODULO
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


def test_the_interleaved_pattern_reads_modulo_and_doubling_in_any_order() -> None:
    loop = "for (int s = 1; s < blockDim.x; s <<= 1) { if (0 == (tid % (s * 2))) s_[tid] += s_[tid + s]; __syncthreads(); }"
    for text, active in ((loop, True), (loop.replace("s * 2", "s * 4"), False)):
        v = view(TREE_LOOP.format(loop=text))
        caps = find(v, INTERLEAVED)
        assert caps is not None and caps["s"] == "s"
        clause = statements(caps["body"])[0].child_by_field_name("condition")
        assert clause is not None
        assert (MODULO.match(v, clause.child_by_field_name("value"), {"s": "s"}) is not None) == active


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
