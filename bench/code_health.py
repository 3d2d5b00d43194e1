"""Code health: file sizes, import circles, features importing features, private names across
packages and class namesakes, over every package of the project.

    python3 bench/code_health.py [--top 15] [--json]

Prints the ``--top`` longest Python files (lines); every import circle (a strongly connected
component of the import graph: imports at module level, inside functions and under
``TYPE_CHECKING`` all count), each with one circle through it and the lines that make it; every
import of one language-server feature module by another; every private name (``_x``) a module takes
from another package; and every class name defined in more than one module.  Exits 1 when a file
has more than 1,000 lines, or there is a circle, a feature-to-feature import or a private name
imported across packages, else 0 (namesakes are listed, and ``tests/test_namesakes.py`` holds
them to the record mirrors issue 39 folds).  The graph is :mod:`tests/import_graph.py`, the one
``tests/test_layering.py`` asserts on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from import_graph import (  # noqa: E402
    MAX_LINES,
    circles,
    describe,
    edges,
    feature_imports,
    features,
    line_counts,
    modules,
    namesakes,
    private_imports,
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=15, help="how many of the longest files to list")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = ap.parse_args(argv)
    counts = line_counts()
    known = modules()
    graph = edges(known)
    found = circles(graph)
    too_long = [(n, p) for n, p in counts if n > MAX_LINES]
    crossing = feature_imports(known, graph)
    private = private_imports(known)
    twins = namesakes(known)
    if args.json:
        report = {
            "max_lines": MAX_LINES,
            "longest": [{"file": str(p.relative_to(ROOT)), "lines": n} for n, p in counts[: args.top]],
            "over_max": [str(p.relative_to(ROOT)) for _, p in too_long],
            "modules": len(known),
            "imports": len(graph),
            "circles": [{"modules": c, "example": describe(graph, c, known)} for c in found],
            "features": features(known),
            "feature_imports": [{"source": e.source, "target": e.target, "line": e.line} for e in crossing],
            "private_imports": [{"source": e.source, "name": e.target, "line": e.line} for e in private],
            "namesakes": twins,
        }
        print(json.dumps(report, indent=2))
    else:
        print(f"longest files ({len(counts)} in all; at most {MAX_LINES} lines each):")
        for n, p in counts[: args.top]:
            print(f"  {n:6d}  {p.relative_to(ROOT)}{'  <- over' if n > MAX_LINES else ''}")
        print(f"files over {MAX_LINES} lines: {len(too_long)}")
        print(f"import circles ({len(known)} modules, {len(graph)} imports between them): {len(found)}")
        for c in found:
            print(f"  {describe(graph, c, known)}")
        print(
            f"feature-to-feature imports ({len(features(known))} language-server features): {len(crossing)}"
        )
        for e in crossing:
            print(f"  {e.source} -> {e.target} ({known[e.source].relative_to(ROOT)}:{e.line})")
        print(f"private names imported across packages: {len(private)}")
        for e in private:
            print(f"  {e.source} takes {e.target} ({known[e.source].relative_to(ROOT)}:{e.line})")
        print(f"class names defined in several modules: {len(twins)}")
        for name, where in twins.items():
            print(f"  {name}: {', '.join(where)}")
    return 1 if too_long or found or crossing or private else 0


if __name__ == "__main__":
    sys.exit(main())
