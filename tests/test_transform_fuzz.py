"""No exception escapes a transformation: token-mutated kernels of bench/kernels/ and tests/data
through every transformation the search uses (bench/transform_fuzz.py runs >= 50,000)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import pytest
import transform_mutants

from cudasrc import specs as spec_mod
from cudasrc.source import Document
from engine import NotApplicable, Outcome, Subject, Transform, safe_apply
from engine.passes import Apply
from engine.tiled_transpose import TiledTranspose


@pytest.mark.slow
def test_thousands_of_mutants_raise_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="engine")
    tally = transform_mutants.run(3000, seed=3)
    assert tally.applications == 3000
    assert tally.escaped == []
    assert tally.rewrites > 300 and tally.not_applicable > 300  # the mutants exercise both verdicts
    # the only failures caught inside passes are rewrites of broken code that no longer parse
    assert all("holds no __global__ kernel" in m for m in tally.internal), tally.internal


@dataclass(frozen=True)
class _Broken(Transform):
    def apply(self, subject: Subject) -> Outcome:
        raise KeyError("boom")


def test_an_exception_inside_a_pass_is_a_verdict_logged_with_the_kernel(
    caplog: pytest.LogCaptureFixture,
) -> None:
    doc = Document.from_file(Path(__file__).parent.parent / "bench" / "kernels" / "saxpy.cu")
    spec, _ = spec_mod.parse(doc.kernels[0])
    assert spec is not None
    out = safe_apply(_Broken(), Subject(doc.text_in(doc.kernels[0].span), spec))
    assert isinstance(out, NotApplicable) and out.reason == "internal error: KeyError: 'boom'"
    assert "failed on kernel saxpy" in caplog.text


def test_tiled_transpose_refuses_pointer_declarators_without_raising() -> None:
    """A declarator such as ``*x`` once went into a regex unescaped (re.error: nothing to repeat)."""
    doc = Document.from_file(Path(__file__).parent.parent / "bench" / "kernels" / "transpose.cu")
    spec, _ = spec_mod.parse(doc.kernels[0])
    assert spec is not None
    code = (
        "__global__ void transpose(const float* in, float* out, int rows, int cols) {\n"
        "    int *x = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    int y = blockIdx.y * blockDim.y + threadIdx.y;\n"
        "    if (*x < cols && y < rows) out[*x * rows + y] = in[y * cols + *x];\n"
        "}\n"
    )
    out = Apply(TiledTranspose(), (32, 8)).apply(Subject(code, spec))
    assert isinstance(out, NotApplicable) and "no 2-D index pair" in out.reason
