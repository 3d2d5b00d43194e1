"""ISL access maps against the view's index polynomials (``Poly``), over every kernel with a spec
in the corpora: how many accesses each can represent, and the time per kernel.

An access counts as represented by ``Poly`` when its canonical index exists and holds no opaque
quotient (``/`` and ``%`` are atoms there: the polynomial cannot say which element a thread
touches); by ISL when it has a map at every concrete problem of the spec (:mod:`engine.maps`).
Time: the view's polynomials of every access, and the maps of every access, per kernel, on the
normalized kernel (the front end's cost, shared, is not counted in either).  Prints one JSON
object, and writes it with ``--out``::

    python bench/access_maps.py --out bench/results/access_maps.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from cudasrc import specs as spec_mod  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from engine import Subject  # noqa: E402

FOLDERS = ("bench/corpus", "bench/kernels", "tests/data/realcode", "tests/data/variants", "tests/data/passes")


def _opaque(index: dict[tuple[str, ...], int]) -> bool:
    return any("/" in a or "%" in a for m in index for a in m)


def kernels() -> list[tuple[Path, Subject]]:
    out = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.cu")):
            doc = Document.from_file(path)
            for k in doc.kernels:
                spec, errors = spec_mod.parse(k, doc.type_aliases, doc.integer_constants)
                if spec is not None and not errors:
                    out.append((path, Subject(doc.text_in(k.span), spec, context=doc.text)))
    return out


def measure(path: Path, subject: Subject) -> dict[str, Any]:
    try:
        view = subject.normalized.view
    except ValueError as exc:
        return {"file": str(path.relative_to(ROOT)), "error": str(exc)}
    loop_vars = frozenset(lp.var for lp in view.loops if lp.var)
    t0 = time.perf_counter()
    polys = [view.poly(a.node.child_by_field_name("indices") or a.node, loop_vars) for a in view.accesses]
    t1 = time.perf_counter()
    maps = [view.maps.relations(a) for a in view.accesses]
    t2 = time.perf_counter()
    by_poly = [a.index is not None and not _opaque(a.index) for a in view.accesses]
    by_isl = [not isinstance(m, str) for m in maps]
    poly_ok, isl_ok = sum(by_poly), sum(by_isl)
    reasons = sorted({m for m in maps if isinstance(m, str)})
    del polys  # timed only: the view's accesses already hold them
    return {
        "file": str(path.relative_to(ROOT)),
        "kernel": subject.kernel.name,
        "accesses": len(view.accesses),
        "poly": poly_ok,
        "isl": isl_ok,
        "only_poly": sum(p and not i for p, i in zip(by_poly, by_isl, strict=True)),
        "only_isl": sum(i and not p for p, i in zip(by_poly, by_isl, strict=True)),
        "poly_ms": round((t1 - t0) * 1e3, 3),
        "isl_ms": round((t2 - t1) * 1e3, 3),
        "isl_misses": reasons[:4],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = [measure(p, s) for p, s in kernels()]
    ok = [r for r in rows if "error" not in r]
    total = sum(r["accesses"] for r in ok)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    summary = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit.stdout.strip(),
        "machine": f"{platform.machine()} CPU (shared 2-core box), Python {platform.python_version()}",
        "folders": [f for f in FOLDERS if (ROOT / f).exists()],
        "kernels": len(ok),
        "accesses": total,
        "represented_poly": sum(r["poly"] for r in ok),
        "represented_isl": sum(r["isl"] for r in ok),
        "only_isl": sum(r["only_isl"] for r in ok),
        "only_poly": sum(r["only_poly"] for r in ok),
        "kernels_fully_poly": sum(r["poly"] == r["accesses"] for r in ok),
        "kernels_fully_isl": sum(r["isl"] == r["accesses"] for r in ok),
        "ms_per_kernel_poly_median": statistics.median(r["poly_ms"] for r in ok) if ok else 0,
        "ms_per_kernel_isl_median": statistics.median(r["isl_ms"] for r in ok) if ok else 0,
        "ms_per_kernel_isl_max": max((r["isl_ms"] for r in ok), default=0),
        "rows": rows,
    }
    text = json.dumps(summary, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))


if __name__ == "__main__":
    main()
