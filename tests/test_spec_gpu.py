"""Spec grammar additions honoured on the GPU: ``copy(ARG)`` initial data reaches the worker,
``require`` keeps verification sizes legal, ``arg P = NULL`` passes a null pointer; and the spec
inferred for every kernel of tests/data/realcode benchmarks as it is.  Run on a GPU machine:
``python3 -m pytest -q tests/test_spec_gpu.py``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from agent.loop import target_for
from agent.source import Document
from agent.spec import infer, render_inference
from sandbox.contract import Candidate, EvalRequest, Status
from sandbox.worker import LocalExecutor, bench_request

pytestmark = pytest.mark.gpu

DATA = Path(__file__).parent / "data" / "spec_grammar"


@pytest.fixture(scope="module")
def executor() -> Iterator[LocalExecutor]:
    with LocalExecutor() as ex:
        yield ex  # type: ignore[misc]


def test_an_output_that_starts_as_a_copy_of_an_input(executor: LocalExecutor) -> None:
    doc = Document.from_file(DATA / "accumulate_copy.cu")
    target = target_for(doc, "accumulate")
    assert [p.sizes["n"] for p in target.verify_problems] == [96, 992]  # require n % 32 == 0
    k = doc.kernel("accumulate_doubled")
    assert k is not None
    unit = doc.standalone(k)
    doubled = Candidate("doubled", replace(target.baseline, source=unit.source, name="accumulate_doubled"))
    request = EvalRequest(
        id="copy",
        baseline=target.baseline,
        candidates=(doubled,),
        verify_problems=target.verify_problems,
        bench_problem=target.bench_problem,
    )
    result = executor.evaluate(request)
    assert result.baseline.status == Status.OK, result.baseline.message
    (c,) = result.candidates
    # acc[i] = 2 x[i] equals acc[i] + x[i] only when acc starts as a copy of x
    assert c.status == Status.OK, c.message


def test_a_null_pointer_argument(executor: LocalExecutor) -> None:
    doc = Document.from_file(DATA / "layernorm_optional.cu")
    target = target_for(doc, "row_stats")
    result = executor.evaluate(bench_request(target.baseline, target.bench_problem))
    assert result.baseline.status == Status.OK, result.baseline.message  # rstd skipped: no fault


REALCODE = Path(__file__).parent / "data" / "realcode"
# leave part of their output unwritten (trimul_global its upper triangle, laplacian7 the boundary
# of its grid; seen on the H200): need a don't-care output region, which the grammar lacks yet
_NO_DONT_CARE = {"trimul_global", "laplacian7"}


@pytest.mark.parametrize(
    ("file", "name"),
    [
        pytest.param(
            p.name,
            k.name,
            marks=pytest.mark.xfail(k.name in _NO_DONT_CARE, reason="no don't-care output region yet"),
        )
        for p in sorted([*REALCODE.glob("*.cu"), *REALCODE.glob("*.cuh")])
        for k in Document.from_file(p).kernels
    ],
)
def test_the_inferred_spec_of_every_realcode_kernel_benchmarks_as_is(
    executor: LocalExecutor, file: str, name: str
) -> None:
    doc = Document.from_file(REALCODE / file)
    k = doc.kernel(name)
    assert k is not None
    text = render_inference(infer(doc, k))
    at = doc.text.splitlines(keepends=True)
    written = Document("".join(at[: k.span.start_line]) + text + "".join(at[k.span.start_line :]), doc.path)
    target = target_for(written, name)
    result = executor.evaluate(bench_request(target.baseline, target.bench_problem))
    assert result.baseline.status == Status.OK, result.baseline.message
