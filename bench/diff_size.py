"""How many lines each accepted rewrite changes, and whether it keeps the user's names.

Every kernel with a spec under the test data (tests/data/passes/, tests/data/variants/,
tests/data/hygiene/), bench/kernels/ and the real-code corpus (bench/corpus/, where present) is
offered to every pass of the registry with the value it guesses first; for each rewrite that
applies, the unified diff of the kernel's definition (before -> after) is counted (added plus
removed lines) and the names the kernel uses of its unit's macros, typedefs and ``__device__``
helpers are looked up in the rewrite (a rewrite "keeps" them when every one is still there).
Writes ``bench/results/diff_size.json`` (median and 90th percentile of changed lines, per pass)::

    python bench/diff_size.py [--out bench/results/diff_size.json]
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import json
import logging
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from agent.target import TargetError, target_for  # noqa: E402
from cudasrc import specs as spec_mod  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from engine import NotApplicable, Subject, safe_apply  # noqa: E402
from engine.passes import Apply  # noqa: E402
from engine.registry import PASSES  # noqa: E402

FOLDERS = ("tests/data/passes", "tests/data/variants", "tests/data/hygiene", "bench/kernels", "bench/corpus")


def kernel_files(root: Path = ROOT) -> list[Path]:
    """The ``.cu`` files to offer (refusal fixtures left out)."""
    out: list[Path] = []
    for folder in FOLDERS:
        out += sorted(p for p in (root / folder).rglob("*.cu") if not p.name.endswith("_refused.cu"))
    return out


def subject_of(path: Path) -> Subject | None:
    """The file's first kernel with a spec, in its unit, as the search builds it; None without one."""
    try:
        t = target_for(Document.from_file(path))
    except (TargetError, ValueError, OSError):
        return None
    doc = Document(t.text, t.path)
    k = doc.kernel_at(t.text.count("\n", 0, t.definition_start))
    if k is None:
        return None
    spec, errors = spec_mod.parse(k, doc.type_aliases, doc.integer_constants)
    if spec is None or errors:
        return None
    return Subject(t.definition, spec, context=t.baseline.source)


def changed_lines(before: str, after: str) -> int:
    """Added plus removed lines of the unified diff ``before`` -> ``after``."""
    diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
    return sum(1 for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---")))


def user_names(subject: Subject) -> set[str]:
    """The names of the unit's macros, typedefs and ``__device__`` helpers the kernel uses."""
    front = subject.front
    defined = set(front.types) | set(front.functions) | _macros(subject.context or subject.code)
    tokens = _identifiers(subject.code)
    return (defined & tokens) - {tp.name for tp in subject.kernel.template_params}


def _macros(unit: str) -> set[str]:
    doc = Document(unit)
    out, stack = set(), [doc.tree.root_node]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        name = n.child_by_field_name("name") if n.type in ("preproc_def", "preproc_function_def") else None
        if name is not None:
            out.add(doc.node_text(name))
    return out


def _identifiers(code: str) -> set[str]:
    doc = Document(code)
    out, stack = set(), [doc.tree.root_node]
    while stack:
        n = stack.pop()
        stack.extend(n.children)
        if n.type in ("identifier", "type_identifier", "field_identifier"):
            out.add(doc.node_text(n))
    return out


def rewrites(path: Path) -> list[dict[str, Any]]:
    """One row per pass that rewrites the file's kernel."""
    s = subject_of(path)
    if s is None:
        return []
    names = user_names(s)
    rows = []
    for p in PASSES:
        try:
            found = p.match(s.normalized.view)
        except Exception:  # a pass that cannot read the kernel has no rewrite to count
            continue
        if isinstance(found, NotApplicable):
            continue
        out = safe_apply(Apply(p, p.guess(found)), s)
        if isinstance(out, NotApplicable):
            continue
        lost = sorted(names - _identifiers(out.code))
        rows.append(
            {
                "file": str(path.relative_to(ROOT)),
                "pass": p.name,
                "changed_lines": changed_lines(s.code, out.code),
                "normalized": s.normalized.code != s.code,
                "names": sorted(names),
                "lost": lost,
            }
        )
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    sizes = sorted(r["changed_lines"] for r in rows)
    by_pass: dict[str, list[int]] = {}
    for r in rows:
        by_pass.setdefault(r["pass"], []).append(r["changed_lines"])
    named = [r for r in rows if r["names"]]
    return {
        "rewrites": len(rows),
        "median_changed_lines": statistics.median(sizes) if sizes else None,
        "p90_changed_lines": sizes[int(0.9 * (len(sizes) - 1))] if sizes else None,
        "per_pass": {
            k: {"rewrites": len(v), "median": statistics.median(v)} for k, v in sorted(by_pass.items())
        },
        "with_user_names": len(named),
        "keeping_every_name": sum(1 for r in named if not r["lost"]),
        "normalized_kernels_rewritten": sum(1 for r in rows if r["normalized"]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "diff_size.json")
    args = ap.parse_args()
    logging.getLogger("engine").setLevel(logging.ERROR)
    rows = [row for path in kernel_files() for row in rewrites(path)]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    record = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/diff_size.py",
        "commit": commit or "unknown",
        **summary(rows),
        "rows": rows,
    }
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "rows"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
