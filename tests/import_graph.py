"""The project's import graph and file sizes, read from source (nothing is imported).

Shared by ``tests/test_layering.py`` (which asserts on them) and ``bench/code_health.py`` (which
prints them).  Every ``import`` statement of a file counts, wherever it stands: at module level,
inside a function, under ``if TYPE_CHECKING:``.  ``from X import n`` is an edge to ``X.n`` when
that is a module of the tree, else to ``X``; relative imports are resolved against the file's
package; a module importing itself (``if __name__ == "__main__"`` re-importing it under its
name) is no edge.  A circle is a strongly connected component of the graph with more than one
module: Python can load it only in a lucky order, and none of its modules can be read, tested
or moved alone.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("base", "sandbox", "cudasrc", "engine", "agent", "learning", "server")  # bottom layer first
MAX_LINES = 1000  # the longest a file of PACKAGES may be


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (both dotted names) on ``line`` of ``source``'s file."""

    source: str
    target: str
    line: int


def modules(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Dotted name -> file of every module of ``packages`` (a package is its ``__init__``)."""
    found: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(path: Path, name: str) -> tuple[tuple[str, int], ...]:
    """(absolute dotted name, line) of every import statement anywhere in the file of module
    ``name``; ``from X import a`` yields ``X`` and ``X.a`` (the caller knows which is a module)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return _imported(path.read_text(encoding="utf-8"), str(path), package)


@functools.cache  # by the text: each file is parsed once however many checks read it
def _imported(text: str, filename: str, package: str) -> tuple[tuple[str, int], ...]:
    return tuple(_statements(ast.parse(text, filename), package))


def _statements(tree: ast.Module, package: str) -> Iterator[tuple[str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            yield module, node.lineno
            for alias in node.names:
                if alias.name != "*":
                    yield f"{module}.{alias.name}", node.lineno


def edges(known: dict[str, Path]) -> list[Edge]:
    """Every import between modules of ``known``: for ``import a.b.c`` the deepest known one."""
    out: dict[tuple[str, str], Edge] = {}
    for name, path in known.items():
        for target, line in imported(path, name):
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and (name, target) not in out:
                out[name, target] = Edge(name, target, line)
    return sorted(out.values(), key=lambda e: (e.source, e.target))


def circles(graph: list[Edge]) -> list[list[str]]:
    """The graph's circles: its strongly connected components of two or more modules, each
    sorted, in order of their first module (Tarjan's algorithm)."""
    succ: dict[str, list[str]] = {}
    for e in graph:
        succ.setdefault(e.source, []).append(e.target)
        succ.setdefault(e.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, iter(succ[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(succ[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(found)


def shortest_circle(graph: list[Edge], component: list[str]) -> list[Edge]:
    """One shortest circle through the component's first module, as the edges that make it."""
    first = component[0]
    inside = set(component)
    succ: dict[str, list[Edge]] = {}
    for e in graph:
        if e.source in inside and e.target in inside:
            succ.setdefault(e.source, []).append(e)
    paths: dict[str, list[Edge]] = {first: []}
    frontier = [first]
    while frontier:
        nxt = []
        for node in frontier:
            for e in succ.get(node, []):
                if e.target == first:
                    return [*paths[node], e]
                if e.target not in paths:
                    paths[e.target] = [*paths[node], e]
                    nxt.append(e.target)
        frontier = nxt
    raise ValueError(f"{component} is not a circle")


def describe(graph: list[Edge], component: list[str], known: dict[str, Path], root: Path = ROOT) -> str:
    """A component in one line: its modules, then one circle through them with file:line."""
    steps = " -> ".join(
        f"{e.source} ({known[e.source].relative_to(root)}:{e.line})"
        for e in shortest_circle(graph, component)
    )
    return f"{len(component)} modules: {', '.join(component)}; e.g. {steps} -> {component[0]}"


def line_counts(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> list[tuple[int, Path]]:
    """(lines, file) of every Python file of ``packages``, longest first."""
    counts = [(len(p.read_text(encoding="utf-8").splitlines()), p) for p in modules(root, packages).values()]
    return sorted(counts, key=lambda c: (-c[0], c[1]))


def private_imports(known: dict[str, Path]) -> list[Edge]:
    """Every private name (``_x``) a module takes from another top-level package than its own:
    ``from X import _name``, or ``m._name`` where ``m`` names a module of that package
    (``import X as m``, ``from P import m``).  ``target`` is ``X._name``; a private name is its
    package's own business."""
    found: set[Edge] = set()
    tops = {name.split(".")[0] for name in known}
    for name, path in known.items():
        home = name.split(".")[0]

        def foreign(module: str, home: str = home) -> bool:
            return module.split(".")[0] in tops and module.split(".")[0] != home

        for target, line in imported(path, name):
            module, _, last = target.rpartition(".")
            if last.startswith("_") and not last.startswith("__") and foreign(module):
                found.add(Edge(name, target, line))
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    aliases[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in known:
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and foreign(aliases.get(node.value.id, ""))
            ):
                found.add(Edge(name, f"{aliases[node.value.id]}.{node.attr}", node.lineno))
    return sorted(found, key=lambda e: (e.source, e.target))


SHARED_SERVER_MODULES = ("server.runs",)  # has a setup (the cancel command), but is what run features share


def features(known: dict[str, Path]) -> list[str]:
    """The language server's feature modules: ``server/<name>.py`` with a top-level ``setup``
    function (what ``server.app`` wires onto the server), but for :data:`SHARED_SERVER_MODULES`."""
    found = []
    for name, path in known.items():
        if name.count(".") != 1 or not name.startswith("server.") or name in SHARED_SERVER_MODULES:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        if any(isinstance(n, ast.FunctionDef) and n.name == "setup" for n in tree.body):
            found.append(name)
    return sorted(found)


def feature_imports(known: dict[str, Path], graph: list[Edge]) -> list[Edge]:
    """Imports from one feature module into another: a feature stands alone, sharing only through
    non-feature modules (the server object, the protocol, the runs, the store, the texts)."""
    names = set(features(known))
    return [e for e in graph if e.source in names and e.target in names]


def namesakes(known: dict[str, Path]) -> dict[str, list[str]]:
    """Class name -> the modules defining a class of that name, for names defined in two or more
    modules (nested classes count): one concept, one class."""
    found: dict[str, list[str]] = {}
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, []).append(name)
    return {k: sorted(v) for k, v in sorted(found.items()) if len(v) > 1}
