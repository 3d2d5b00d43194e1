"""The wheel (what the editor's managed environment installs) carries every package of the source."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import PACKAGES

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
ROOT = Path(__file__).resolve().parents[1]


def test_every_python_package_is_listed_for_the_wheel() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in PACKAGES
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found <= listed, f"not in [tool.setuptools] packages: {sorted(found - listed)}"
