""".ci/run writes nothing outside its clone but one temporary folder it removes, builds the docs
strictly, and runs the extension (which installs the browser and node modules the results-view
replay needs) before the Python tests, so that test runs in CI instead of skipping."""

from __future__ import annotations

import re
from pathlib import Path

CI = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text(encoding="utf-8")
STEPS = [line for line in CI.splitlines() if not line.lstrip().startswith("#")]


def _first(pattern: str) -> int:
    return next(i for i, line in enumerate(STEPS) if re.search(pattern, line))


def test_one_temporary_folder_removed_on_exit_holds_everything_written_outside_the_clone() -> None:
    code = "\n".join(STEPS)
    assert code.count("mktemp") == 1 and "CI_TMP=$(mktemp -d)" in code
    assert "trap 'rm -rf \"$CI_TMP\"' EXIT" in code
    for name in (
        "HOME",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "RAY_TMPDIR",
        "TMPDIR",
    ):
        assert re.search(rf'\b{name}="\$CI_TMP/', code), f"{name} is not pointed into the temporary folder"
    assert _first(r"export HOME=") < _first(r"pip install"), "HOME must move before pip writes its cache"
    assert not re.search(r"(?<!\$CI_TMP)/tmp\b", code), "a path outside the temporary folder"


def test_the_docs_build_strictly_and_the_extension_runs_before_the_python_tests() -> None:
    assert re.search(r"mkdocs build --strict", CI)
    assert _first(r"extension/ci\.sh") < _first(r"python -m pytest")
