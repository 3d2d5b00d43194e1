"""Transformation fuzz: every built-in transformation applied to token-mutated kernels.

The kernels of ``bench/kernels/`` and ``tests/data/transforms/`` are mutated token by token
(a token deleted, duplicated, swapped with its neighbour, replaced by another of the kernel's
tokens or by one of :data:`POOL`, or inserted), each mutant keeping its original spec, and every
transformation the search uses (:func:`transformations`) is applied to it.  Counted:

- ``escaped``: exceptions out of :func:`engine.safe_apply`, the entry point of the
  search (must be 0);
- ``internal``: exceptions inside a transformation that ``safe_apply`` turned into
  ``NotApplicable("internal error: ...")`` (bugs to fix; listed by transformation and message).

The transformations include every structural pass of :data:`engine.registry.PASSES`
with every value of its parameter space on a 132-SM device (``registry.candidates(device)``), and
the mechanical arms (:mod:`engine.mechanical`).

Usage: ``python bench/transform_fuzz.py [--applications 50000] [--seed 0] [--out FILE]``;
writes ``bench/results/transform_fuzz.json`` and prints a summary.  The CPU test
(tests/test_transform_fuzz.py) runs a few thousand applications of the same engine
(``tests/transform_mutants.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from transform_mutants import run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--applications", type=int, default=50_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--deadline-s", type=float, default=420.0)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "transform_fuzz.json")
    args = ap.parse_args()
    logging.getLogger("engine").setLevel(logging.ERROR)  # each caught error is tallied
    t0 = time.monotonic()
    tally = run(args.applications, args.seed, args.deadline_s)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    record = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit or "unknown",
        "applications": tally.applications,
        "rewrites": tally.rewrites,
        "not_applicable": tally.not_applicable,
        "escaped": len(tally.escaped),
        "escaped_examples": tally.escaped[:20],
        "internal_errors": sum(tally.internal.values()),
        "internal_by_message": dict(tally.internal.most_common(30)),
        "seed": args.seed,
        "seconds": round(time.monotonic() - t0, 1),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(
        f"{tally.applications} applications: {tally.rewrites} rewrites, {tally.not_applicable} not applicable, "
        f"{record['internal_errors']} internal errors caught, {len(tally.escaped)} exceptions escaped "
        f"({record['seconds']} s)"
    )
    for message, count in tally.internal.most_common(10):
        print(f"  {count:6d}  {message}")
    return 1 if tally.escaped else 0


if __name__ == "__main__":
    sys.exit(main())
