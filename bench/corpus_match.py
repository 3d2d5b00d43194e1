"""The built-in engine on the real-code corpus (bench/corpus/): for each kernel, is its family's
rewrite proposed, does it compile with NVRTC, and does it compute the original's outputs in host
emulation at the spec's verify sizes?

The corpus is ``bench/corpus/index.json`` (one row per naive kernel: file, kernel, family, origin,
its expert pair) and one folder per family whose ``passes.txt`` names the passes that family's
rewrite comes from.  The rate that counts is over the kernels whose expert pair is a *structural*
change (tiling, shared memory, a block or warp per row...): the engine should find that rewrite
itself.  Prints the record and writes it (default ``bench/results/corpus_match.json``)::

    python bench/corpus_match.py                    # every kernel, with host emulation
    python bench/corpus_match.py --no-emulate       # proposed + compiles only (fast)
    python bench/corpus_match.py --match 'transpose/*'
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import logging
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "bench" / "corpus"
RESULT = ROOT / "bench" / "results" / "corpus_match.json"
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))
if str(ROOT / "tests") not in sys.path:
    sys.path.append(str(ROOT / "tests"))  # the host emulation the pass tests use (test_transforms)

from agent.proposal import Proposal  # noqa: E402
from agent.target import Target, target_for  # noqa: E402
from cudasrc import specs as spec_mod  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from engine import NotApplicable, Subject, safe_apply  # noqa: E402
from engine.registry import candidates  # noqa: E402
from sandbox.compiler import compile_cuda  # noqa: E402

GXX = ("g++", "-std=c++20", "-pthread", "-O1", "-fno-strict-aliasing", "-ffp-contract=off", "-w")
# sums the rewrite reorders differ in the last bits: the largest absolute difference allowed when
# the spec sets no tolerance (inputs are in [-1, 1]; the corpus' sums run over a few thousand terms)
ATOL = 1e-4


@dataclass(frozen=True)
class Row:
    """One corpus kernel's outcome.  ``equal`` is None where the emulation did not run."""

    file: str
    kernel: str
    family: str
    structural: bool  # its expert pair is a structural change
    proposed: bool
    compiles: bool
    equal: bool | None
    rewrite: str  # the pass (and parameters) that proposed it
    reason: str  # why not: the passes' reasons on a miss, the compiler's or the emulation's message


def index(corpus: Path = CORPUS) -> list[dict[str, Any]]:
    """The corpus' kernels, in the index' order."""
    return list(json.loads((corpus / "index.json").read_text())["kernels"])


def family_passes(family: str, corpus: Path = CORPUS) -> tuple[str, ...]:
    """The pass names a family's rewrite comes from (its ``passes.txt``)."""
    lines = (corpus / family / "passes.txt").read_text().splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def target(entry: dict[str, Any], corpus: Path = CORPUS) -> Target:
    return target_for(Document.from_file(corpus / entry["file"]), entry["kernel"])


def subject(t: Target, kernel: str) -> Subject:
    doc = Document(t.text, t.path)
    k = doc.kernel(kernel)
    if k is None:
        raise ValueError(f"{t.path}: no kernel {kernel}")
    spec, errors = spec_mod.parse(k, doc.type_aliases, doc.integer_constants)
    if spec is None or errors:
        raise ValueError(f"{t.path}: no usable spec: {errors}")
    return Subject(t.definition, spec, context=t.baseline.source)


def _key(name: str) -> str:
    return name.replace("_", "").lower()


def rewrite(entry: dict[str, Any], corpus: Path = CORPUS) -> tuple[Subject | None, str, Target]:
    """The first rewrite of the entry's kernel by one of its family's passes (each pass's values
    best first), or None and the passes' reasons."""
    t = target(entry, corpus)
    base = subject(t, entry["kernel"])
    wanted = {_key(p) for p in family_passes(entry["family"], corpus)}
    reasons: list[str] = []
    for shape in candidates():
        name = getattr(shape, "name", "") or type(shape).__name__
        if _key(name) not in wanted:
            continue
        out = safe_apply(shape, base)
        if not isinstance(out, NotApplicable):
            return out, repr(shape), t
        why = f"{name}: {out.reason}"
        if why not in reasons:
            reasons.append(why)
    return None, "; ".join(reasons) or "no pass of the family in this checkout", t


def emulate(t: Target, out: Subject | Proposal, work: Path) -> tuple[bool, str]:
    """Whether the rewrite (a pass's, or an expert kernel as ``compare``'s proposal) computes the
    original's outputs on the host (g++ and the pass tests' CUDA emulation header) at every verify
    problem; the difference or the failure otherwise."""
    from test_transforms import DATA as HOST_HEADERS
    from test_transforms import host_program

    program = host_program(t, out)
    src = work / "emulate.cpp"
    src.write_text(program)
    threads = (
        ["-DHOST_CUDA_THREADS"] if re.search(r"__syncthreads|shfl|sync\(|tiled_partition", program) else []
    )
    exe = work / "emulate"
    build = subprocess.run(
        [*GXX, f"-I{HOST_HEADERS}", *threads, str(src), "-o", str(exe)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if build.returncode != 0:
        first = next((ln for ln in build.stderr.splitlines() if "error" in ln), build.stderr[:300])
        return False, f"host emulation does not build: {first.strip()[:300]}"
    try:
        run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return False, "host emulation timed out"
    if run.returncode != 0:
        return False, f"host emulation failed: {run.stderr.strip()[:300]}"
    allowed = max(ATOL, (t.tolerance.atol or 0.0) if t.tolerance else 0.0)
    worst = float(run.stdout)
    return worst <= allowed, "" if worst <= allowed else f"outputs differ by {worst:g} (allowed {allowed:g})"


def check(entry: dict[str, Any], corpus: Path = CORPUS, emulation: bool = True) -> Row:
    """Match, compile and emulate one corpus kernel; every failure is a row, never an exception."""
    expert = entry.get("expert") or {}
    row = Row(
        file=entry["file"],
        kernel=entry["kernel"],
        family=entry["family"],
        structural=bool(expert.get("structural")),
        proposed=False,
        compiles=False,
        equal=None,
        rewrite="",
        reason="",
    )
    try:
        out, why, t = rewrite(entry, corpus)
    except Exception as e:  # an unreadable kernel or spec is a miss with its message
        return replace(row, reason=f"{type(e).__name__}: {e}")
    if out is None:
        return replace(row, reason=why)
    row = replace(row, proposed=True, rewrite=why)
    compiled = compile_cuda(t.unit_with(out.code), name_expressions=(t.kernel,), options=t.baseline.options)
    if not compiled.result.ok:
        log = compiled.result.log.strip().splitlines()
        return replace(row, reason=f"NVRTC: {log[0] if log else 'failed'}"[:400])
    row = replace(row, compiles=True)
    if emulation and shutil.which("g++") is not None:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                equal, message = emulate(t, out, Path(tmp))
            except Exception as e:  # an emulation harness gap is a row with its message
                equal, message = False, f"host emulation: {type(e).__name__}: {e}"
        row = replace(row, equal=equal, reason=message)
    return row


def _rate(rows: list[Row]) -> dict[str, Any]:
    ok = sum(r.proposed and r.compiles and r.equal is not False for r in rows)
    return {"matched": ok, "total": len(rows), "percent": round(100.0 * ok / len(rows), 1) if rows else 0.0}


def record(rows: list[Row], emulation: bool) -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    structural = [r for r in rows if r.structural]
    families: dict[str, list[Row]] = {}
    for r in rows:
        families.setdefault(r.family, []).append(r)
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": "python bench/corpus_match.py" + ("" if emulation else " --no-emulate"),
        "commit": commit or "unknown",
        "emulated": emulation,
        "structural_pairs": _rate(structural),
        "all_kernels": _rate(rows),
        "families": {f: _rate(rs) for f, rs in sorted(families.items())},
        "misses": {
            f"{r.file}:{r.kernel}": r.reason
            for r in rows
            if not (r.proposed and r.compiles and r.equal is not False)
        },
        "kernels": [asdict(r) for r in rows],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=RESULT, help="where to write the JSON (default: %(default)s)")
    ap.add_argument("--match", default="*", help="only the corpus files matching this glob (family/file.cu)")
    ap.add_argument(
        "--no-emulate", action="store_true", help="skip the host emulation (proposed + compiles only)"
    )
    args = ap.parse_args()
    logging.getLogger("engine").setLevel(logging.ERROR)
    rows: list[Row] = []
    for entry in index():
        if not fnmatch.fnmatch(entry["file"], args.match):
            continue
        row = check(entry, emulation=not args.no_emulate)
        rows.append(row)
        state = "ok  " if row.proposed and row.compiles and row.equal is not False else "MISS"
        print(
            f"{state} {row.file}:{row.kernel}  {row.rewrite or row.reason}"[:240], file=sys.stderr, flush=True
        )
    rec = record(rows, not args.no_emulate)
    text = json.dumps(rec, indent=1)
    print(json.dumps({k: rec[k] for k in ("structural_pairs", "all_kernels", "families")}, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
