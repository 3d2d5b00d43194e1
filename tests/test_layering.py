"""base <- sandbox <- cudasrc <- engine <- agent <- learning <- server: a package imports only those
below it; the language server never loads GPU libraries; no import circle; no file over 1,000
lines; no private name (``_x``) imported from another package.

Each layering rule is checked in a fresh interpreter (what a real `import` pulls in, transitively)
and statically over the package's source (imports hidden inside functions count too).  Circles
and file sizes come from :mod:`import_graph` (``bench/code_health.py`` prints the same).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from import_graph import (
    MAX_LINES,
    PACKAGES,
    Edge,
    circles,
    describe,
    edges,
    feature_imports,
    features,
    imported,
    line_counts,
    modules,
    private_imports,
)

ROOT = Path(__file__).resolve().parents[1]

GPU = ("cupy", "torch", "vllm", "ray", "pycuda")
LSP = ("pygls", "lsprotocol")


def above(package: str) -> tuple[str, ...]:
    """The packages above ``package`` in the layer order (:data:`import_graph.PACKAGES`)."""
    return PACKAGES[PACKAGES.index(package) + 1 :]


# Runtime rule: what a fresh import of the package (or any of its modules) may never load.
RULES: dict[str, tuple[str, ...]] = {
    package: above(package) + GPU + (() if package == "server" else LSP) for package in PACKAGES
}
# Static rule: which top-level packages a package's source may never import, even lazily.
# (agent lazily imports vllm/ray/openai behind extras; sandbox's worker lazily imports cupy/torch;
# learning's completion names torch modules without importing them.)
LAZY_OK: dict[str, tuple[str, ...]] = {
    "server": ("ray",),
    "learning": ("torch", "vllm", "ray"),
    "agent": ("torch", "vllm", "ray"),
    "sandbox": ("cupy", "torch", "vllm", "ray", "pycuda"),
}
STATIC: dict[str, tuple[str, ...]] = {
    package: tuple(m for m in RULES[package] if m not in LAZY_OK.get(package, ())) for package in PACKAGES
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
    known = modules(package_dir.parent, (package_dir.name,))
    return {
        (path.name, target.split(".")[0])
        for name, path in known.items()
        for target, _ in imported(path, name)
    }


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


CLOSING_IMPORTS = {
    "module level": "from pkg.a import A\n",
    "relative, module level": "from .a import A\n",
    "inside a function": "def f():\n    from pkg import a\n    return a\n",
    "under TYPE_CHECKING": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n",
}


@pytest.mark.parametrize("closing", sorted(CLOSING_IMPORTS))
def test_checker_catches_an_import_circle(tmp_path: Path, closing: str) -> None:
    """A planted circle pkg.a -> pkg.b -> pkg.c -> pkg.a is found whatever kind of import closes
    it; without the closing import there is none (so the check can fail both ways)."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\nA = 1\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("import pkg.c as c\nimport json\n")
    (pkg / "c.py").write_text("X = 2\n")
    assert circles(edges(modules(tmp_path, ("pkg",)))) == []
    (pkg / "c.py").write_text(CLOSING_IMPORTS[closing] + "X = 2\n")
    known = modules(tmp_path, ("pkg",))
    graph = edges(known)
    assert circles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    assert describe(graph, ["pkg.a", "pkg.c", "pkg.sub.b"], known, tmp_path).startswith(
        "3 modules: pkg.a, pkg.c, pkg.sub.b; e.g. pkg.a (pkg/a.py:1) -> pkg.sub.b (pkg/sub/b.py:1) -> pkg.c"
    )


def test_no_import_circle_in_any_package() -> None:
    """agent, sandbox and server: no module imports (at any depth, in any way) one that imports it."""
    known = modules()
    graph = edges(known)
    found = [describe(graph, c, known) for c in circles(graph)]
    assert not found, "import circles:\n" + "\n".join(found)


def test_no_file_over_1000_lines() -> None:
    long = [f"{p.relative_to(ROOT)}: {n} lines" for n, p in line_counts(ROOT, PACKAGES) if n > MAX_LINES]
    assert not long, f"files over {MAX_LINES} lines:\n" + "\n".join(long)


def test_no_private_name_imported_across_packages() -> None:
    known = modules()
    found = [
        f"{e.source} ({known[e.source].relative_to(ROOT)}:{e.line}) imports {e.target}"
        for e in private_imports(known)
    ]
    assert not found, "private names imported from another package:\n" + "\n".join(found)


def test_checker_catches_a_private_import(tmp_path: Path) -> None:
    """``from other import _x`` and ``module._x`` are caught; the same inside its own package is not."""
    for pkg in ("low", "high"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "low" / "a.py").write_text("_hidden = 1\nshown = 2\n")
    (tmp_path / "low" / "b.py").write_text("from low.a import _hidden\n")
    (tmp_path / "high" / "c.py").write_text("from low.a import shown\n")
    assert private_imports(modules(tmp_path, ("low", "high"))) == []
    (tmp_path / "high" / "c.py").write_text("from low.a import _hidden, shown\n")
    assert private_imports(modules(tmp_path, ("low", "high"))) == [Edge("high.c", "low.a._hidden", 1)]
    (tmp_path / "high" / "c.py").write_text("from low import a\nimport low.b as b\nx = a._hidden + b.y\n")
    assert private_imports(modules(tmp_path, ("low", "high"))) == [Edge("high.c", "low.a._hidden", 3)]


def test_no_language_server_feature_imports_another() -> None:
    known = modules()
    assert {"server.hover", "server.lenses", "server.optimize", "server.diagnostics"} <= set(features(known))
    found = [
        f"{e.source} ({known[e.source].relative_to(ROOT)}:{e.line}) imports {e.target}"
        for e in feature_imports(known, edges(known))
    ]
    assert not found, "features importing features:\n" + "\n".join(found)


def test_checker_catches_a_feature_importing_a_feature(tmp_path: Path) -> None:
    """Two modules with a ``setup`` are features; one importing the other is caught, importing a
    shared module (no ``setup``) is not."""
    (tmp_path / "server").mkdir()
    (tmp_path / "server" / "__init__.py").write_text("")
    (tmp_path / "server" / "texts.py").write_text("X = 1\n")
    (tmp_path / "server" / "hover.py").write_text("from server.texts import X\ndef setup(ls):\n    pass\n")
    (tmp_path / "server" / "hints.py").write_text("def setup(ls):\n    pass\n")
    known = modules(tmp_path, ("server",))
    assert features(known) == ["server.hints", "server.hover"]
    assert feature_imports(known, edges(known)) == []
    (tmp_path / "server" / "hover.py").write_text("from server import hints\ndef setup(ls):\n    pass\n")
    known = modules(tmp_path, ("server",))
    assert feature_imports(known, edges(known)) == [Edge("server.hover", "server.hints", 1)]
