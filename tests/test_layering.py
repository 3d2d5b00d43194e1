"""server -> agent -> sandbox, never upward; the language server never loads GPU libraries.

Each rule is checked in a fresh interpreter (what a real `import` pulls in, transitively)
and statically over the package's source (imports hidden inside functions count too).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RULES: dict[str, tuple[str, ...]] = {
    "server": ("cupy", "torch", "vllm", "ray", "pycuda"),
    "agent": ("pygls", "lsprotocol", "server", "cupy", "torch", "vllm", "ray", "pycuda"),
    "sandbox": ("server", "agent", "pygls", "lsprotocol", "cupy", "torch", "vllm", "ray", "pycuda"),
}
# Static rule: which top-level packages a package's source may never import, even lazily.
# (agent may lazily import vllm/ray behind extras; sandbox's worker lazily imports cupy.)
STATIC: dict[str, tuple[str, ...]] = {
    "server": ("cupy", "torch", "vllm", "pycuda"),
    "agent": ("server", "pygls", "lsprotocol", "cupy", "pycuda"),
    "sandbox": ("server", "agent", "pygls", "lsprotocol"),
}


def loaded_after_import(module: str, forbidden: tuple[str, ...], path: Path = ROOT) -> list[str]:
    """Import ``module`` in a fresh interpreter; return the forbidden top-level modules it loaded."""
    code = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(path)!r})
        import {module}
        top = sorted({{m.split(".")[0] for m in sys.modules}})
        print(json.dumps([m for m in top if m in {list(forbidden)!r}]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def static_imports(package_dir: Path) -> set[tuple[str, str]]:
    """(file, top-level module) for every import statement anywhere in the package's source."""
    found: set[tuple[str, str]] = set()
    for py in package_dir.rglob("*.py"):
        tree = ast.parse(py.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {(py.name, a.name.split(".")[0]) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add((py.name, node.module.split(".")[0]))
    return found


def all_submodules(package: str) -> list[str]:
    return sorted(
        package + "." + ".".join(p.relative_to(ROOT / package).with_suffix("").parts)
        for p in (ROOT / package).rglob("*.py")
        if p.name not in ("__init__.py", "__main__.py")
    )


@pytest.mark.parametrize("package", sorted(RULES))
def test_fresh_import_loads_nothing_forbidden(package: str) -> None:
    assert loaded_after_import(package, RULES[package]) == []


@pytest.mark.parametrize("package", sorted(RULES))
def test_every_submodule_imports_cleanly(package: str) -> None:
    """Importing any module of the package (not just the package) obeys the runtime rules."""
    mods = all_submodules(package)
    assert mods, f"{package} has no modules"
    code = "import importlib, json, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in mods)
    code += (
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({list(RULES[package])!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("package", sorted(STATIC))
def test_source_never_imports_upward(package: str) -> None:
    bad = sorted((f, m) for f, m in static_imports(ROOT / package) if m in STATIC[package])
    assert bad == []


def test_checker_catches_a_forbidden_import(tmp_path: Path) -> None:
    """The checks above can fail: a package that pulls in a forbidden module is caught both ways."""
    pkg = tmp_path / "leaky"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from leaky import inner\n")
    (pkg / "inner.py").write_text("def f():\n    import colorsys\n    return colorsys\nimport csv\n")
    assert loaded_after_import("leaky", ("csv", "colorsys"), tmp_path) == ["csv"]
    assert ("inner.py", "colorsys") in static_imports(pkg)
    assert ("inner.py", "csv") in static_imports(pkg)
