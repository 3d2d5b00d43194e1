"""Passes are rules over the view: no pass imports another (shared facts live in the view, the
access maps and the guards), and the registry holds no pass without a corpus folder."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

from import_graph import imported, modules

from engine import NotApplicable, Outcome
from engine.passes import Match, Pass
from engine.registry import PASSES, unbacked
from engine.view import KernelView

ROOT = Path(__file__).resolve().parents[1]
# the one pass left that applies another as its first step (the histogram's grid-stride loop)
COMPOSES = {("engine.histogram", "engine.elementwise")}


def pass_imports() -> set[tuple[str, str]]:
    files = modules()
    owners = {type(p).__module__ for p in PASSES}
    found = set()
    for module in owners:
        for target, _ in imported(files[module], module):
            base = target if target in files else target.rpartition(".")[0]
            if base in owners and base != module:
                found.add((module, base))
    return found


def test_no_pass_imports_another() -> None:
    assert pass_imports() <= COMPOSES, "a pass imports another: move the shared code into the view"


def test_every_registered_pass_is_named_by_a_corpus_folder() -> None:
    assert unbacked(ROOT) == ()


class _Orphan(Pass[Match]):
    name = "Orphan"
    space = (1,)

    def match(self, view: KernelView) -> Match | NotApplicable:
        return NotApplicable("never")

    def rewrite(self, match: Match, params: Hashable) -> Outcome:
        return NotApplicable("never")


def test_a_pass_without_a_corpus_folder_is_refused(tmp_path: Path) -> None:
    assert unbacked(ROOT, (_Orphan(),)) == ("Orphan",)
    (tmp_path / "bench" / "corpus" / "orphans").mkdir(parents=True)
    (tmp_path / "bench" / "corpus" / "orphans" / "passes.txt").write_text("# the family\nOrphan\n")
    assert unbacked(tmp_path, (_Orphan(),)) == ()
