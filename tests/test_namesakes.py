"""One class per concept: no class name is defined in two modules (a run's result is one record,
``agent.records``, stored, sent and reported as it is)."""

from __future__ import annotations

from pathlib import Path

from import_graph import modules, namesakes


def test_no_class_name_is_defined_twice() -> None:
    found = namesakes(modules())
    assert not found, (
        "classes of one name in several modules (one concept, one class; else rename):\n"
        + "\n".join(f"  {k}: {', '.join(v)}" for k, v in found.items())
    )


def test_the_finder_sees_a_namesake(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("class Row:\n    pass\n")
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    class Other:\n        pass\n")
    assert namesakes(modules(tmp_path, ("pkg",))) == {}
    (tmp_path / "pkg" / "b.py").write_text("def f():\n    class Row:\n        pass\n")
    assert namesakes(modules(tmp_path, ("pkg",))) == {"Row": ["pkg.a", "pkg.b"]}
