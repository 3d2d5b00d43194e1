"""Spec grammar additions honoured on the GPU: ``copy(ARG)`` initial data reaches the worker,
``require`` keeps verification sizes legal, ``arg P = NULL`` passes a null pointer, ``compare``
regions leave don't-care elements alone, ``offset=`` points into a padded allocation,
``values(EXPR)`` builds structured inputs, ``const C ... copy(ARG)`` fills ``__constant__`` memory
from an argument, ``define`` compiles each problem with its own ``-D``, ``--max-memory-gb`` caps
an evaluation; and the spec inferred for every kernel of tests/data/realcode benchmarks as it is.
Run on a GPU machine: ``python3 -m pytest -m gpu -v tests/test_spec_gpu.py``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from agent.target import target_for
from cudasrc.source import Document
from cudasrc.specs import infer, render_inference
from sandbox.contract import Candidate, EvalRequest, Status
from sandbox.local import LocalExecutor, bench_request

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


def evaluate_against(executor: LocalExecutor, file: str, baseline: str, *others: str) -> tuple[Status, ...]:
    """The statuses of the baseline (first) and of each other kernel of ``file`` as a candidate,
    every kernel compiled from the whole file (``__constant__`` symbols and macros included)."""
    doc = Document.from_file(DATA / file)
    target = target_for(doc, baseline)
    candidates = tuple(
        Candidate(name, replace(target.baseline, source=doc.text, name=name)) for name in others
    )
    request = EvalRequest(
        id=f"grammar-{file}",
        baseline=target.baseline,
        candidates=candidates,
        verify_problems=target.verify_problems,
        bench_problem=target.bench_problem,
    )
    result = executor.evaluate(request)
    assert result.baseline.status == Status.OK, result.baseline.message
    for c in result.candidates:
        print(c.candidate_id, c.status.value, c.message)
    return (result.baseline.status, *(c.status for c in result.candidates))


def test_a_compare_region_leaves_the_upper_triangle_alone(executor: LocalExecutor) -> None:
    statuses = evaluate_against(
        executor, "causal_scores.cu", "causal_scores", "causal_scores_square", "causal_scores_off_diagonal"
    )
    assert statuses == (Status.OK, Status.OK, Status.MISMATCH)


def test_an_offset_pointer_into_a_padded_allocation(executor: LocalExecutor) -> None:
    # smooth3 reads u[-1] and writes out[0..n-1] of pointers one element into their allocations
    statuses = evaluate_against(executor, "padded_stencil.cu", "smooth3", "smooth3_halo")
    assert statuses == (Status.OK, Status.OK)


def test_structured_inputs_from_element_expressions(executor: LocalExecutor) -> None:
    assert evaluate_against(executor, "structured_inputs.cu", "check_structure", "all_ones") == (
        Status.OK,
        Status.OK,
    )


def test_a_constant_filter_holds_its_pointer_arguments_data(executor: LocalExecutor) -> None:
    assert evaluate_against(executor, "constant_filter.cu", "conv_const", "conv_pointer") == (
        Status.OK,
        Status.OK,
    )


def test_each_problem_compiles_with_its_own_defines(executor: LocalExecutor) -> None:
    doc = Document.from_file(DATA / "fixed_size.cu")
    target = target_for(doc, "scale_fixed")
    assert [p.defines["N"] for p in (*target.verify_problems, target.bench_problem)] == [97, 1021, 1 << 20]
    request = EvalRequest(
        id="defines",
        baseline=target.baseline,
        candidates=(),
        verify_problems=target.verify_problems,
        bench_problem=target.bench_problem,
    )
    result = executor.evaluate(request)
    assert result.baseline.status == Status.OK, result.baseline.message
    assert [c.label for c in result.baseline.checks][:2] == ["n=97", "n=97"]  # every size verified
    # without them, n=97 runs with the file's N=4096: a write past the end of `out`
    bare = replace(
        request,
        id="no-defines",
        verify_problems=tuple(replace(p, defines={}) for p in target.verify_problems),
        bench_problem=replace(target.bench_problem, defines={}),
    )
    refused = executor.evaluate(bare).baseline
    assert refused.status == Status.REJECTED and "out-of-bounds" in refused.message, refused.message


def test_max_memory_gb_caps_a_real_evaluation(capsys: pytest.CaptureFixture[str]) -> None:
    from server.cli.main import main

    path = str(DATA / "padded_stencil.cu")  # 2 arrays of 2^22 + 2 floats: 32 MiB
    assert main(["bench", path, "--kernel", "smooth3", "--max-memory-gb", "0.01"]) != 0
    assert "memory cap" in capsys.readouterr().err
    assert main(["bench", path, "--kernel", "smooth3", "--max-memory-gb", "1"]) == 0


REALCODE = Path(__file__).parent / "data" / "realcode"


@pytest.mark.parametrize(
    ("file", "name"),
    [
        (p.name, k.name)
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
