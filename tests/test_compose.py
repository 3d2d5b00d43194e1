"""Compositions of passes (engine/compose.py): a candidate holding several structural
rewrites, each matched on the kernel the previous one wrote, searched by the built-in proposer.

Driven by tests/data/compose/: each kernel's first line ``// composes: A + B`` names the passes
of the composition the search must rank first for it; that composition, with the launch bounds
and restrict arms in the same candidate, compiles with NVRTC and computes the original's outputs
in host emulation at the spec's odd verify sizes (and on the GPU, with the ``gpu`` marker, every
composition found is verified by the sandbox)."""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Hashable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from test_pass_families import emulate, subject
from test_transforms import assert_all_verified, compiles, target

from agent import loop
from agent.builtin import BuiltinProposer, Config
from agent.target import Target
from engine import NotApplicable, Outcome, Subject, apply_all, safe_apply
from engine.compose import Chain, compositions
from engine.elementwise import Vectorize
from engine.launch_fill import LaunchFill
from engine.passes import Apply, Emitter, Match, Pass
from engine.registry import PASSES, candidates
from engine.tiled_dot import TiledDot
from engine.view import KernelView
from sandbox.contract import Candidate, EvalOptions, EvalRequest
from sandbox.testing import DEVICE, FakeExecutor

FOLDER = Path(__file__).parent / "data" / "compose"
KERNELS = sorted(f.name for f in FOLDER.glob("*.cu"))


def found(file: str) -> tuple[Target, Subject, list[Chain]]:
    """The kernel, its subject and the compositions the search enumerates for it, best first."""
    t = target(file, folder=FOLDER)
    s = subject(t)
    firsts = [(a, out) for a in candidates(DEVICE) if isinstance(out := safe_apply(a, s), Subject)]
    return t, s, compositions(s, firsts, PASSES, DEVICE)


def declared(file: str) -> list[str]:
    first = (FOLDER / file).read_text().splitlines()[0]
    assert first.startswith("// composes: "), "a composed kernel's first line names its passes"
    return first.removeprefix("// composes: ").split(" + ")


def nvrtc(t: Target, code: str) -> None:
    try:
        compiles(t, code)
    except Exception as exc:  # the compiler itself is missing, not a compile error
        if type(exc).__name__ == "CompilerUnavailable":
            pytest.skip(f"NVRTC is not available: {exc}")
        raise


@pytest.mark.parametrize("file", KERNELS)
def test_the_declared_composition_ranks_first_and_every_one_found_compiles(file: str) -> None:
    t, s, chains = found(file)
    assert chains, f"no composition of passes applies to {file}"
    assert [step.name for step in chains[0].steps] == declared(file)
    for chain in chains:
        out = safe_apply(chain, s)
        assert isinstance(out, Subject), out
        assert len(out.applied) == 1 and out.applied[0].count(", then ") == len(chain.steps) - 1
        nvrtc(t, out.code)


@pytest.mark.skipif(shutil.which("g++") is None, reason="no g++ for the host emulation")
@pytest.mark.parametrize("file", KERNELS)
def test_a_composition_with_launch_bounds_is_equal_in_host_emulation(file: str, tmp_path: Path) -> None:
    """The best composition plus ``__launch_bounds__`` and restrict in one candidate, at the
    spec's odd verify sizes, with aligned and misaligned arrays."""
    t, s, chains = found(file)
    out = apply_all(s, Config(shape=chains[0], restrict=True, bounds=True).transforms())
    assert isinstance(out, Subject), out
    assert "__launch_bounds__(" in out.code and "__restrict__" in out.code
    nvrtc(t, out.code)
    emulate(t, out, tmp_path / "composed")


def test_a_later_step_that_refuses_names_itself_and_leaves_the_earlier_one_intact() -> None:
    _, s, _ = found("scale_one_block.cu")
    fill = Apply(LaunchFill(), "thread")
    alone = safe_apply(fill, s)
    assert isinstance(alone, Subject)
    dot = TiledDot()
    refused = Chain((fill, Apply(dot, dot.space[0]))).apply(s)
    assert isinstance(refused, NotApplicable)
    assert refused.reason.startswith("step 2 (TiledDot(") and "after a thread per row:" in refused.reason
    again = safe_apply(fill, s)
    assert isinstance(again, Subject) and (again.code, again.launch) == (alone.code, alone.launch)


@dataclasses.dataclass(frozen=True)
class _Found(Match):
    pass


class _Broken(Pass[_Found]):
    """A pass that matches anything and raises while rewriting, after using a fresh name."""

    name: ClassVar[str] = "Broken"
    space: ClassVar[tuple[Hashable, ...]] = (0,)

    def match(self, view: KernelView) -> _Found | NotApplicable:
        return _Found(view)

    def rewrite(self, match: _Found, params: Any) -> Outcome:
        Emitter(match.view).fresh("v")
        raise RuntimeError("boom")


def test_an_exception_in_a_later_step_is_a_refusal_of_the_composition() -> None:
    _, s, _ = found("scale_one_block.cu")
    chain = Chain((Apply(LaunchFill(), "thread"), Apply(_Broken(), 0)))
    out = safe_apply(chain, s)
    assert isinstance(out, NotApplicable)
    assert out.reason.startswith("step 2 (Broken(0))") and "internal error: RuntimeError: boom" in out.reason


def test_fresh_names_of_a_later_step_avoid_the_earlier_steps() -> None:
    _, s, chains = found("histogram_packs.cu")
    out = safe_apply(chains[0], s)
    assert isinstance(out, Subject)
    first = safe_apply(chains[0].steps[0], s)
    assert isinstance(first, Subject)
    mine = s.normalized.view.identifiers
    before = first.normalized.view.identifiers - mine
    after = out.normalized.view.identifiers - mine
    assert before and before < after  # the second step's names are new ones, the first's are kept


def test_the_search_proposes_a_composition_in_its_first_batch() -> None:
    """Two passes apply one after the other to a one-block elementwise kernel: the first batch
    holds the launch fill alone and the fill then 16-byte packs, each one candidate."""
    t = target("scale_one_block.cu", folder=FOLDER)
    executor = FakeExecutor()
    loop.optimize(
        t, BuiltinProposer(), executor, budget=loop.OptimizeBudget(wall_s=None, candidates=6), seed=0
    )
    first = next(r for r in executor.requests if r.candidates).candidates
    sources = [c.kernel.source for c in first]
    assert any(
        "a thread per row" in src and "reinterpret_cast<const float4*>(x)" not in src for src in sources
    )
    composed = [c for c in first if "reinterpret_cast<const float4*>(x)" in c.kernel.source]
    assert composed and composed[0].launches is not None
    assert all(launch.block == (256, 1, 1) for launch in composed[0].launches)
    assert composed[0].launches[-1].grid[0] == (1 << 22) // (256 * 4)  # the bench size fills the GPU


def test_compositions_respect_the_budget_and_order_by_prior() -> None:
    t = target("scale_one_block.cu", folder=FOLDER)
    s = subject(t)
    firsts = [(a, out) for a in candidates(DEVICE) if isinstance(out := safe_apply(a, s), Subject)]
    few = compositions(s, firsts, PASSES, DEVICE, budget=2)
    assert 0 < len(few) <= 2
    everything = compositions(s, firsts, PASSES, DEVICE)
    assert everything[0] == few[0]
    assert everything[0].steps[1] == Apply(Vectorize(), Vectorize(16, 1))  # the vectorizer's guess


@pytest.mark.gpu
def test_every_composition_is_equivalent_on_the_gpu() -> None:
    """Each composition found for each kernel of tests/data/compose/, with launch bounds,
    verified against the original by the sandbox at the spec's verify sizes."""
    from sandbox.local import LocalExecutor

    with LocalExecutor() as executor:
        for file in KERNELS:
            t, s, chains = found(file)
            batch = []
            for k, chain in enumerate(chains):
                out = apply_all(s, Config(shape=chain, bounds=True).transforms())
                assert isinstance(out, Subject), out
                launches = None
                if (out.launch.grid or out.launch.block) and t.relaunch is not None:
                    *verify, _ = t.relaunch(out.launch)
                    launches = (*verify, verify[-1])
                source = dataclasses.replace(t.baseline, source=t.unit_with(out.code))
                batch.append(Candidate(f"c{k}", source, launches))
            request = EvalRequest(
                id=f"compose-{file}",
                baseline=t.baseline,
                candidates=tuple(batch),
                verify_problems=t.verify_problems,
                bench_problem=t.verify_problems[-1],
                seeds=(5, 6),
                tolerance=t.tolerance,
                options=EvalOptions(time=False),
            )
            assert_all_verified(executor.evaluate(request), f"compose/{file}")
