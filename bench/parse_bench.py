"""Parse benchmark for the source model (not a timed test): writes bench/results/parse_bench.json.

Builds a ~10,000-line file with ~200 kernels from the realistic fixtures in tests/data (each copy's
kernels renamed), then measures, as medians over repeats:

- full parse (tree-sitter) of the file — target < 30 ms;
- incremental reparse after a one-line edit (``Document.apply_change``) — target < 5 ms;
- the language server's per-request work on a fresh document: listing kernels (symbols/lenses)
  and launch sites — target well under 20 ms.

Usage: ``python bench/parse_bench.py [--lines 10000] [--repeats 30] [--out FILE]``; the result file keeps
one run per machine (a re-run replaces that machine's entry).
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
from importlib import metadata
from pathlib import Path

import tree_sitter

from cudasrc.source import Document
from cudasrc.syntax import LANGUAGE

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ("vector_ops.cu", "reduce.cu", "host_infer.cu")


def big_source(lines: int, max_kernels: int | None = None) -> str:
    """Copies of the fixtures, kernels and helpers renamed per copy, up to ``lines`` lines.
    Past ``max_kernels`` kernels, copies keep their functions as ``__device__`` helpers."""
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
    kernels = 0
    copy = 0
    while sum(t.count("\n") for t in out) < lines:
        for t in texts:
            renamed = pattern.sub(lambda m, c=copy: f"{m[1]}_{c}", t)
            if max_kernels is not None and kernels + renamed.count("__global__") > max_kernels:
                renamed = renamed.replace("__global__", "__device__")
            kernels += renamed.count("__global__")
            out.append(renamed)
        copy += 1
    return "".join(out)


def median_ms(fn, repeats: int) -> float:
    """Median time of ``fn()``; what it returns is freed after the clock stops (freeing a 10,000-line
    tree takes ~3 ms, which is not parsing)."""
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - t0) * 1e3)
        del result
    return statistics.median(samples)


def measure(text: str, repeats: int) -> dict[str, object]:
    data = text.encode()
    parser = tree_sitter.Parser(LANGUAGE)
    doc = Document(text, "big.cu")
    n_kernels = len(doc.kernels)
    mid = doc.kernels[n_kernels // 2]
    edit_line = mid.body_span.start_line + 1 if mid.body_span else mid.span.start_line

    def edit() -> Document:
        return doc.apply_change(edit_line, 4, edit_line, 4, "int unused_tmp = 0; ")

    assert len(edit().kernels) == n_kernels, "the edit must not lose kernels"
    timings = {
        "full_parse": median_ms(lambda: parser.parse(data), repeats),
        "document_open": median_ms(lambda: Document(text, "big.cu"), repeats),
        "incremental_reparse_one_line_edit": median_ms(edit, repeats),
        "kernels_list": median_ms(lambda: Document(text, "big.cu", _tree=doc.tree).kernels, repeats),
        "edit_then_kernels_list": median_ms(lambda: edit().kernels, repeats),
        "launch_sites": median_ms(lambda: Document(text, "big.cu", _tree=doc.tree).launches, repeats),
    }
    return {
        "lines": text.count("\n"),
        "bytes": len(data),
        "kernels": n_kernels,
        "launches": len(doc.launches),
        "median_ms": {k: round(v, 3) for k, v in timings.items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "parse_bench.json"))
    args = ap.parse_args()

    files = {
        "all_kernels": measure(big_source(args.lines), args.repeats),
        "200_kernels": measure(big_source(args.lines, max_kernels=200), args.repeats),
    }
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
            "node": platform.node(),
            "tree_sitter": metadata.version("tree-sitter"),
            "tree_sitter_cuda": metadata.version("tree-sitter-cuda"),
        },
        "repeats": args.repeats,
        "files": files,
        "targets_ms": {
            "full_parse": 30,
            "incremental_reparse_one_line_edit": 5,
            "edit_then_kernels_list": 20,
        },
    }
    out = Path(args.out)
    # one run per machine: re-running on a machine replaces its entry, other machines' runs stay
    runs = json.loads(out.read_text(encoding="utf-8"))["runs"] if out.exists() else []
    same = ("node", "platform")
    runs = [r for r in runs if any(r["machine"][k] != result["machine"][k] for k in same)] + [result]
    out.write_text(json.dumps({"runs": runs}, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(files, indent=2))


if __name__ == "__main__":
    main()
