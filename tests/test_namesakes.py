"""One class per concept: no class name is defined in two modules, but the record/row mirrors
issue 39's records part replaces with one typed record per result (listed below, to shrink)."""

from __future__ import annotations

from pathlib import Path

from import_graph import modules, namesakes

# The stored record, the wire row and the CLI report of one result, still mirrored: issue 39
# ("Each result defined once") folds each into one record.  Nothing else may join this list.
RECORD_MIRRORS: dict[str, tuple[str, ...]] = {
    "AttemptRecord": ("agent.attempts", "server.protocol"),
    "CandidateRef": ("agent.compare", "server.cli.reports"),
    "KernelResults": ("server.protocol", "server.store"),
    "ProfileReport": ("agent.profile", "server.cli.reports"),
    "ProfiledKernel": ("server.cli.reports", "server.protocol", "server.store"),
    "Rewrite": ("server.protocol", "server.runs"),
    "Roofline": ("server.protocol", "server.store"),
    "Stall": ("sandbox.contract", "server.protocol"),
}


def test_no_class_name_is_defined_twice_but_the_record_mirrors() -> None:
    found = namesakes(modules())
    new = {k: v for k, v in found.items() if tuple(v) != RECORD_MIRRORS.get(k)}
    assert not new, (
        "classes of one name in several modules (one concept, one class; else rename):\n"
        + "\n".join(f"  {k}: {', '.join(v)}" for k, v in new.items())
    )


def test_the_finder_sees_a_namesake(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("class Row:\n    pass\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    class Other:\n        pass\n")
    assert namesakes(modules(tmp_path, ("pkg",))) == {}
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    class Row:\n        pass\n")
    assert namesakes(modules(tmp_path, ("pkg",))) == {"Row": ["pkg.a", "pkg.b"]}
