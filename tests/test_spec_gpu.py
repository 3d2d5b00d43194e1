"""Spec grammar additions honoured on the GPU: ``copy(ARG)`` initial data reaches the worker, and
``require`` keeps verification sizes and launches legal.  Run on a GPU machine:
``python3 -m pytest -q tests/test_spec_gpu.py``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from agent.loop import target_for
from agent.source import Document
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
