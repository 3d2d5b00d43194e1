"""How many spellings of each family the built-in passes match: tests/data/variants/<family>/*.cu.

Each family folder names its passes in ``passes.txt``; a variant is matched when one of them
applies to it (with the parameters the search guesses first).  Prints one JSON object: matched /
total per family, and the reason of each miss.  Run it on another checkout to compare (the
"before" of a change)::

    python bench/variant_match.py                          # this checkout
    PYTHONPATH=/path/to/old python bench/variant_match.py  # another one, same corpus
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ROOT / "tests" / "data" / "variants"
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: another checkout named there wins

from agent import builtin  # noqa: E402
from agent.target import Target, target_for  # noqa: E402
from cudasrc import specs as spec_mod  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from engine import NotApplicable, Subject, safe_apply  # noqa: E402


def variants(folder: Path = VARIANTS) -> list[tuple[str, Path]]:
    """(family, file) of every variant, in a stable order."""
    return [(f.parent.name, f) for f in sorted(folder.glob("*/*.cu"))]


def family_passes(family: str, folder: Path = VARIANTS) -> tuple[str, ...]:
    """The pass names a family's variants must be matched by (its ``passes.txt``)."""
    lines = (folder / family / "passes.txt").read_text().splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def shapes() -> tuple[Any, ...]:
    """The structural candidates the search tries: the registry's, and an older checkout's
    ``agent.builtin.SHAPES`` (its transformations outside the registry)."""
    from engine.registry import candidates

    older = tuple(getattr(builtin, "SHAPES", ()))
    return tuple({repr(s): s for s in (*candidates(), *older)}.values())


def subject(t: Target) -> Subject:
    doc = Document(t.text, t.path)
    k = doc.kernel_at(t.text.count("\n", 0, t.definition_start))
    assert k is not None
    spec, errors = spec_mod.parse(k, doc.type_aliases, doc.integer_constants)
    if spec is None or errors:
        raise ValueError(f"{t.path}: no usable spec: {errors}")
    try:
        return Subject(t.definition, spec, context=t.baseline.source)  # type: ignore[call-arg]
    except TypeError:  # pragma: no cover - older checkouts
        return Subject(t.definition, spec)


def rewrite(family: str, path: Path) -> tuple[Subject | None, str, Target]:
    """The first rewrite of ``path`` by one of its family's passes (the first parameter value of
    each that applies), or None and why none applies."""
    t = target_for(Document.from_file(path))
    base = subject(t)
    wanted = {_key(p) for p in family_passes(family, path.parent.parent)}
    reasons: list[str] = []
    for shape in shapes():
        name = getattr(shape, "name", "") or type(shape).__name__
        if _key(name) not in wanted:
            continue
        out = safe_apply(shape, base)
        if not isinstance(out, NotApplicable):
            return out, repr(shape), t
        if out.reason not in reasons:
            reasons.append(out.reason)
    return None, "; ".join(reasons) or "no pass of the family in this checkout", t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, help="also write the JSON here")
    args = ap.parse_args()
    logging.getLogger("engine").setLevel(logging.ERROR)
    families: dict[str, list[int]] = {}
    misses: dict[str, str] = {}
    for family, path in variants():
        counts = families.setdefault(family, [0, 0])
        counts[1] += 1
        try:
            out, why, _ = rewrite(family, path)
        except Exception as e:  # a variant an old checkout cannot even read is a miss
            out, why = None, f"{type(e).__name__}: {e}"
        if out is not None:
            counts[0] += 1
        else:
            misses[f"{family}/{path.name}"] = why
    checkout = Path(builtin.__file__).resolve().parents[1]  # the agent measured (PYTHONPATH's)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=checkout, capture_output=True, text=True, check=False
    ).stdout.strip()
    record = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/variant_match.py",
        "checkout": str(checkout),
        "commit": commit or "unknown",
        "matched": sum(m for m, _ in families.values()),
        "total": sum(t for _, t in families.values()),
        "families": {f: {"matched": m, "total": t} for f, (m, t) in families.items()},
        "misses": misses,
    }
    text = json.dumps(record, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
