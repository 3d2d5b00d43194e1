"""Accesses as integer maps (agent/transforms/maps.py): the facts passes read — a permutation, a
translation by taps (fixed and looped), strides and contiguity, a reduction axis — on kernels
spelled as real code spells them, and the reason where an index is not quasi-affine."""

from __future__ import annotations

from pathlib import Path

import pytest

import engine.maps as maps_module
from cudasrc import specs as spec_mod
from cudasrc.source import Document
from engine import Subject
from engine.maps import Permutation, ReductionAxis, Translation
from engine.view import Access, KernelView

KERNELS = Path(__file__).parent.parent / "bench" / "kernels"


def view_of(name: str | None = None, code: str | None = None) -> KernelView[Subject]:
    doc = Document(code) if code is not None else Document.from_file(KERNELS / str(name))
    spec, errors = spec_mod.parse(doc.kernels[0], doc.type_aliases, doc.integer_constants)
    assert spec is not None and not errors, errors
    return Subject(doc.text_in(doc.kernels[0].span), spec, context=doc.text).normalized.view


def access(view: KernelView[Subject], text: str) -> Access:
    (found,) = [a for a in view.accesses if view.text(a.node) == text]
    return found


FLAT = """\
// @cuda-agent sizes R=37 C=53 verify R=5 C=3
// @cuda-agent launch grid=cdiv(R * C, block) block=64
// @cuda-agent arg in in float[R * C]
// @cuda-agent arg out out float[R * C]
// @cuda-agent arg R = R
// @cuda-agent arg C = C
__global__ void t(const float* in, float* out, int R, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= R * C) return;
    int row = idx / C, col = idx % C;
    out[col * R + row] = in[idx];
}
"""


def test_a_flat_transpose_through_div_and_mod_is_a_permutation_at_every_size() -> None:
    v = view_of(code=FLAT)
    out, inp = access(v, "out[col * R + row]"), access(v, "in[idx]")
    assert isinstance(v.maps.permutation(out, inp), Permutation)
    assert v.maps.contiguous(inp) and not v.maps.contiguous(out)
    assert v.maps.strides(out, "tx") != v.maps.strides(inp, "tx")


def test_a_write_that_two_threads_share_is_no_permutation() -> None:
    v = view_of(code=FLAT.replace("out[col * R + row]", "out[col]"))
    assert v.maps.permutation(access(v, "out[col]"), access(v, "in[idx]")) == (
        "two threads write the same output element"
    )


def test_an_unguarded_tail_changes_the_fact_only_where_the_sizes_say_so() -> None:
    # without the early return, threads past R * C write past the end: some size breaks injectivity
    v = view_of(code=FLAT.replace("if (idx >= R * C) return;", ""))
    assert isinstance(v.maps.permutation(access(v, "out[col * R + row]"), access(v, "in[idx]")), str)


def test_stencil_taps_are_translations_of_the_thread_point() -> None:
    v = view_of("stencil2d.cu")
    center = [a for a in v.accesses if a.written][-1]
    for text, per_size in (("u[c - 1]", {-1}), ("u[c + 1]", {1})):
        found = v.maps.translation(access(v, text), center)
        assert isinstance(found, Translation) and all(t == per_size for t in found.taps)
    up = v.maps.translation(access(v, "u[c - w]"), center)
    assert isinstance(up, Translation) and len({next(iter(t)) for t in up.taps}) == len(up.taps)


def test_loop_taps_with_constant_bounds_are_translations_over_the_loops() -> None:
    v = view_of("conv2d.cu")
    center = next(a for a in v.accesses if a.written)
    found = v.maps.translation(access(v, "img[y * w + x]"), center)
    assert isinstance(found, Translation)
    assert len(found.loops) == 2 and len(found.taps[-1]) == 17 * 17  # distinct at the benchmark width
    assert isinstance(v.maps.translation(access(v, "filt[fy * FILTER_WIDTH + fx]"), center), str)


def test_a_loop_over_a_row_or_a_column_is_a_reduction_axis_with_its_stride() -> None:
    rows = view_of("softmax.cu")
    first = rows.maps.reduction_axis(rows.loops[0])
    assert isinstance(first, ReductionAxis) and set(first.strides.values()) == {
        (1,) * len(first.strides["x"])
    }
    assert rows.maps.reduction_axis(rows.loops[-1]) == "the write `out[j]` moves with the loop"
    cols = view_of("column_sum.cu")
    axis = cols.maps.reduction_axis(cols.loops[0])
    assert isinstance(axis, ReductionAxis) and all(s > 1 for s in axis.strides["x"])


def test_a_product_of_two_thread_values_has_no_map_and_says_why() -> None:
    v = view_of(code=FLAT.replace("out[col * R + row]", "out[col * row]"))
    reason = v.maps.relations(access(v, "out[col * row]"))
    assert isinstance(reason, str) and "not quasi-affine" in reason


def test_without_islpy_every_fact_says_why_and_the_view_still_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(maps_module, "isl", None)
    v = view_of(code=FLAT)
    found = v.maps.permutation(access(v, "out[col * R + row]"), access(v, "in[idx]"))
    assert found == "islpy is not installed: no access maps"
    assert v.accesses and not v.maps.contiguous(access(v, "in[idx]"))
