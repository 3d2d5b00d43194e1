"""The documentation: a README that fits on a page, ARCHITECTURE.md under 300 lines, a command
table that lists every command, reference pages generated from the code, and a site that builds
with no broken link (``mkdocs build --strict``, as .ci/run builds it)."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from server.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _generator():  # docs/ is not a package
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_fits_on_a_page_and_the_architecture_in_300_lines() -> None:
    assert len(README.splitlines()) <= 200
    assert len((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8").splitlines()) <= 300
    assert README.index("![") < 600, "the screenshot near the top"


def test_the_quickstart_has_the_two_commands_ci_runs() -> None:
    section = README.split("## Quickstart (fresh machine)", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"```bash\n(.*?)```", section, re.S)) == 2


def test_the_readme_command_table_lists_every_command() -> None:
    table = README.split("## Commands", 1)[1].split("\n\n", 2)[1]
    listed = {row.split("`")[1].split()[1] for row in table.splitlines() if row.startswith("| `cuda-agent")}
    assert listed == set(cli.commands)


def test_the_cli_reference_documents_every_command_and_option() -> None:
    page = _generator().pages()["reference/cli.md"]

    def walk(group: click.Group, path: str) -> None:
        for name, command in group.commands.items():
            assert f"## `{path} {name}`" in page
            for param in command.params:
                for opt in param.opts if isinstance(param, click.Option) else ():
                    assert f"`{opt}" in page or f" {opt}" in page, (name, opt)
            if isinstance(command, click.Group):
                walk(command, f"{path} {name}")

    walk(cli, "cuda-agent")


def test_every_generated_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for path in _generator().pages():
        assert path in nav


@pytest.mark.slow
def test_the_site_builds_with_no_broken_link(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs") or str(Path(sys.executable).parent / "mkdocs")
    if not Path(mkdocs).exists():
        pytest.skip("mkdocs is not installed (the `docs` extra)")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent), "HOME": str(tmp_path)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "cli.html").exists()


def test_every_pass_has_its_page_in_the_site() -> None:
    from engine.registry import PASSES

    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for module in sorted({type(p).__module__.rsplit(".", 1)[1] for p in PASSES}):
        page = ROOT / "docs" / "internals" / "passes" / f"{module}.md"
        assert page.exists(), f"no page for the pass module engine/{module}.py"
        assert f"internals/passes/{module}.md" in nav
        assert f"<!-- docstring: engine/{module}.py -->" in page.read_text(encoding="utf-8")
