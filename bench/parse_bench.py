"""Parse benchmark for the source model (not a timed test): writes bench/results/parse_bench.json.

Builds a ~10,000-line file with ~200 kernels from the realistic fixtures in tests/data (each copy's
kernels renamed), then measures, as medians over repeats:

- full parse (tree-sitter) of the file — target < 30 ms;
- incremental reparse after a one-line edit (``Document.apply_change``) — target < 5 ms;
- the language server's per-request work on a fresh document: listing kernels (symbols/lenses)
  and launch sites — target well under 20 ms.

Usage: ``python bench/parse_bench.py [--lines 10000] [--repeats 30]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import tree_sitter

from agent.source import LANGUAGE, Document

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ("vector_ops.cu", "reduce.cu", "host_infer.cu")


def big_source(lines: int) -> str:
    """Copies of the fixtures, kernels and helpers renamed per copy, up to ``lines`` lines."""
    texts = [(ROOT / "tests" / "data" / f).read_text(encoding="utf-8") for f in FIXTURES]
    names = sorted(
        {
            m
            for t in texts
            for m in re.findall(r"__global__\s+(?:void\s+)?(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(", t)
        }
        | {"main"}
    )
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b")
    out: list[str] = []
    copy = 0
    while sum(t.count("\n") for t in out) < lines:
        for t in texts:
            out.append(pattern.sub(lambda m, c=copy: f"{m[1]}_{c}", t))
        copy += 1
    return "".join(out)


def median_ms(fn, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "parse_bench.json"))
    args = ap.parse_args()

    text = big_source(args.lines)
    data = text.encode()
    parser = tree_sitter.Parser(LANGUAGE)
    doc = Document(text, "big.cu")
    n_kernels = len(doc.kernels)
    mid = doc.kernels[n_kernels // 2]
    edit_line = mid.body_span.start_line + 1 if mid.body_span else mid.span.start_line

    full_ms = median_ms(lambda: parser.parse(data), args.repeats)
    document_ms = median_ms(lambda: Document(text, "big.cu"), args.repeats)

    def incremental() -> None:
        doc.apply_change(edit_line, 4, edit_line, 4, "int unused_tmp = 0; ")

    incremental_ms = median_ms(incremental, args.repeats)
    kernels_ms = median_ms(lambda: Document(text, "big.cu", _tree=doc.tree).kernels, args.repeats)
    edited = doc.apply_change(edit_line, 4, edit_line, 4, "int unused_tmp = 0; ")
    edit_then_kernels_ms = median_ms(
        lambda: doc.apply_change(edit_line, 4, edit_line, 4, "int unused_tmp = 0; ").kernels, args.repeats
    )
    launches_ms = median_ms(lambda: Document(text, "big.cu", _tree=doc.tree).launches, args.repeats)
    assert len(edited.kernels) == n_kernels, "the edit must not lose kernels"

    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    result = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": "python bench/parse_bench.py " + " ".join(sys.argv[1:]),
        "git_commit": commit,
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "tree_sitter": tree_sitter.__version__ if hasattr(tree_sitter, "__version__") else "",
        },
        "file": {
            "lines": text.count("\n"),
            "bytes": len(data),
            "kernels": n_kernels,
            "launches": len(doc.launches),
        },
        "repeats": args.repeats,
        "median_ms": {
            "full_parse": round(full_ms, 3),
            "document_open": round(document_ms, 3),
            "incremental_reparse_one_line_edit": round(incremental_ms, 3),
            "kernels_list": round(kernels_ms, 3),
            "edit_then_kernels_list": round(edit_then_kernels_ms, 3),
            "launch_sites": round(launches_ms, 3),
        },
        "targets_ms": {
            "full_parse": 30,
            "incremental_reparse_one_line_edit": 5,
            "edit_then_kernels_list": 20,
        },
    }
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result["median_ms"], indent=2))


if __name__ == "__main__":
    main()
