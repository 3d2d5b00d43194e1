"""The spec inferred for every kernel of tests/data/projects/ runs as it is on a GPU: the kernel
checked against itself at the verification sizes (scaled so its launch stays valid) and benchmarked
at the program's own sizes.  Run on a GPU machine:
``python3 -m pytest -m gpu -v tests/test_spec_projects_gpu.py``."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from agent.target import target_for
from cudasrc.source import Document
from cudasrc.specs import infer, render_inference
from sandbox.contract import Candidate, EvalRequest, Status
from sandbox.local import LocalExecutor

pytestmark = pytest.mark.gpu

PROJECTS = Path(__file__).parent / "data" / "projects"
KERNELS = sorted(
    (str(p.relative_to(PROJECTS)), k.name)
    for p in PROJECTS.rglob("*")
    if p.suffix in (".cu", ".cuh", ".h", ".cpp")
    for k in Document.from_file(p).kernels
)


@pytest.fixture(scope="module")
def executor() -> Iterator[LocalExecutor]:
    with LocalExecutor() as ex:
        yield ex  # type: ignore[misc]


@pytest.mark.parametrize(("relative", "name"), KERNELS)
def test_the_inferred_spec_of_every_project_kernel_verifies_and_benchmarks(
    executor: LocalExecutor, relative: str, name: str
) -> None:
    doc = Document.from_file(PROJECTS / relative)
    k = doc.kernel(name)
    assert k is not None
    text = render_inference(infer(doc, k))
    lines = doc.text.splitlines(keepends=True)
    written = Document(
        "".join(lines[: k.span.start_line]) + text + "".join(lines[k.span.start_line :]), doc.path
    )
    target = target_for(written, name)
    itself = Candidate("itself", replace(target.baseline))
    result = executor.evaluate(
        EvalRequest(
            id=f"projects-{name}",
            baseline=target.baseline,
            candidates=(itself,),
            verify_problems=target.verify_problems,
            bench_problem=target.bench_problem,
        )
    )
    assert result.baseline.status == Status.OK, result.baseline.message
    (c,) = result.candidates
    assert c.status == Status.OK, c.message
