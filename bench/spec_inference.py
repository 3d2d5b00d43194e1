"""Spec inference on real-style programs: the inferred spec of every kernel, field by field.

Every kernel of ``tests/data/realcode/`` (``.cu`` programs with their host harness, and headers
that define kernels the programs launch) gets the spec the CLI's ``kernels`` and the editor's
"Add benchmark spec" propose (:func:`cudasrc.specs.spec_for` on a file without a written spec).
It is compared with the spec a developer would write, ``expected/<kernel>.spec`` (``// @cuda-agent``
lines, parsed by the same parser as a spec in a file).  Both are resolved at their benchmark
sizes (:func:`cudasrc.specs.problem`), so names and spellings do not matter, values do.  Fields:

- each expected size (same name, same value);
- the launch: grid, block, dynamic shared memory (three fields);
- the template arguments (one field, when the kernel is a template);
- each argument: an array's role, element type, element count and distribution (four fields),
  a scalar's type and value (two fields);
- each ``const`` line: element type, count, distribution.

Usage: ``python bench/spec_inference.py [--data DIR] [--out FILE] [--before FILE]``; prints
per-kernel and total field-match percentages and writes ``bench/results/spec_inference.json``
(date, commit, numbers, and every mismatched field).  The scoring is ``tests/spec_scores.py``;
tests/test_spec_inference.py asserts >= 90% with it.  ``--data tests/data/projects`` measures the multi-file projects (each folder
with its own ``expected/``; tests/test_spec_projects.py asserts every field).  ``--before``: a
previous run's JSON (the same fixtures measured with an older commit's ``agent`` first on
``PYTHONPATH``), whose totals and mismatches go into the result as ``before``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import cudasrc.source as agent_source

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "spec_inference.json"
sys.path.insert(0, str(ROOT / "tests"))

from spec_scores import DATA, THRESHOLD, measure  # noqa: E402


def _commit() -> str:
    """The commit of the ``agent`` package measured (an older one on PYTHONPATH for ``--before``)."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=Path(agent_source.__file__).parent,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--data", type=Path, default=DATA, help="directory of programs and expected/")
    ap.add_argument("--out", type=Path, default=OUT, help="where the JSON result goes")
    ap.add_argument("--before", type=Path, help="a previous run's JSON, reported as `before`")
    args = ap.parse_args(argv)
    before = None
    if args.before is not None:
        try:
            before = json.loads(args.before.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            print(f"--before {args.before}: {exc}", file=sys.stderr)
            return 2
    scores, missing = measure(args.data)
    if missing:
        print("kernels without an expected spec: " + ", ".join(missing), file=sys.stderr)
        return 2
    usable = {s.kernel: s.usable for s in scores}
    fields = sum(s.fields for s in scores)
    matched = sum(s.matched for s in scores)
    total = 100.0 * matched / fields if fields else 0.0
    for s in scores:
        mark = "" if s.usable else "  [not usable]"
        print(f"{s.percent:6.1f}%  {s.matched:3}/{s.fields:<3} {s.kernel} ({s.file}, {s.confidence}){mark}")
        for m in s.mismatches:
            print(f"          {m}")
    print(f"total: {matched}/{fields} fields = {total:.1f}% (target {THRESHOLD:.0f}%)")
    print(
        f"usable specs: {sum(usable.values())}/{len(usable)} (sizes, launch, counts, roles and scalars right)"
    )
    result = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": _commit(),
        "kernels": len(scores),
        "fields": fields,
        "matched": matched,
        "percent": round(total, 2),
        "usable": sum(usable.values()),
        "per_kernel": [
            {
                "kernel": s.kernel,
                "file": s.file,
                "fields": s.fields,
                "matched": s.matched,
                "percent": round(s.percent, 2),
                "confidence": s.confidence,
                "usable": s.usable,
                "mismatches": s.mismatches,
            }
            for s in scores
        ],
    }
    if before is not None:
        result["before"] = {
            k: before.get(k) for k in ("date", "commit", "kernels", "fields", "matched", "percent", "usable")
        } | {
            "mismatches": {
                k["kernel"]: k["mismatches"] for k in before.get("per_kernel", []) if k.get("mismatches")
            }
        }
        print(f"before: {before.get('matched')}/{before.get('fields')} fields ({before.get('commit')})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
