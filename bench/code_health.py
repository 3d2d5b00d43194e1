"""Code health: the longest files of agent/, sandbox/, server/ and the import graph's circles.

    python3 bench/code_health.py [--top 15] [--json]

Prints the ``--top`` longest Python files (lines) and every import circle (a strongly connected
component of the import graph: imports at module level, inside functions and under
``TYPE_CHECKING`` all count), each with one circle through it and the lines that make it.
Exits 1 when a file has more than 1,000 lines or there is a circle, else 0.  The graph is
:mod:`tests/import_graph.py`, the same one ``tests/test_layering.py`` asserts on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from import_graph import MAX_LINES, circles, describe, edges, line_counts, modules  # noqa: E402


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
    if args.json:
        report = {
            "max_lines": MAX_LINES,
            "longest": [{"file": str(p.relative_to(ROOT)), "lines": n} for n, p in counts[: args.top]],
            "over_max": [str(p.relative_to(ROOT)) for _, p in too_long],
            "modules": len(known),
            "imports": len(graph),
            "circles": [{"modules": c, "example": describe(graph, c, known)} for c in found],
        }
        print(json.dumps(report, indent=2))
    else:
        print(f"longest files ({len(counts)} in all; at most {MAX_LINES} lines each):")
        for n, p in counts[: args.top]:
            print(f"  {n:6d}  {p.relative_to(ROOT)}{'  <- over' if n > MAX_LINES else ''}")
        print(f"import circles ({len(known)} modules, {len(graph)} imports between them): {len(found)}")
        for c in found:
            print(f"  {describe(graph, c, known)}")
    return 1 if too_long or found else 0


if __name__ == "__main__":
    sys.exit(main())
