"""The built-in engine over the real-code corpus on a GPU, with the experts measured beside it.

For every kernel of ``bench/corpus/index.json`` (in order, until the deadline): the built-in
search under ``--budget-per-kernel`` (speedup median and quartiles, % of the copy or FP32 ceiling
before and after), and where the kernel has an expert pair, the expert's own speedup over the
naive kernel measured in the same run (one paired, interleaved evaluation, like
``cuda-agent compare``).  Each kernel's row is appended to ``DIR/corpus_suite.jsonl`` as it
finishes; ``DIR/corpus_suite.json`` holds the summary: geomean and fast_1.5 overall and per
family, the mean % of ceiling per family, and over the expert pairs our geomean against the
experts'.  The run stops itself inside ``--deadline`` (a kernel starts only when its budget and
its expert's comparison fit in what is left)::

    python3 bench/corpus_suite.py --out $OUT/corpus --deadline 540 --budget-per-kernel 20
    python3 bench/corpus_suite.py --out /tmp/corpus --deadline 60 --simulate   # no GPU

``--simulate`` evaluates on the simulated GPU (:class:`sandbox.testing.FakeExecutor`: NVRTC
compiles, nothing runs, every verified rewrite is 2x): the same code path, for tests and dry runs.
Needs this repository's packages and their pure-Python dependencies (tree-sitter) on the GPU machine.
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import json
import logging
import math
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "bench" / "corpus"
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from agent import compare as compare_mod  # noqa: E402
from agent import suite  # noqa: E402
from agent.proposal import Proposal  # noqa: E402
from agent.proposer import OptimizeBudget  # noqa: E402
from agent.target import Target, TargetError, target_for  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from sandbox.contract import Status  # noqa: E402
from sandbox.executor import Executor, ExecutorError  # noqa: E402

# what a kernel may take beyond its search budget: the baseline's measurement, the expert's
# paired comparison, compile workers starting (seconds)
OVERHEAD_S = 40.0


def index(corpus: Path = CORPUS) -> list[dict[str, Any]]:
    return list(json.loads((corpus / "index.json").read_text())["kernels"])


def expert_pair(entry: dict[str, Any], corpus: Path = CORPUS) -> tuple[Target, Proposal]:
    """The naive kernel (under its spec and the entry's amendments) and its expert as the
    candidate to compare with it; raises :class:`TargetError` where they cannot be paired."""
    x = entry["expert"]
    doc = Document.from_file(corpus / entry["file"])
    target, proposal, _ = compare_mod.prepare(
        doc,
        entry["kernel"],
        f"{corpus / x['file']}:{x['kernel']}",
        x.get("launch"),
        Document.from_file,
        template=x.get("template"),
        amend=tuple(x.get("spec", ())),
    )
    return target, proposal


def expert_speedup(entry: dict[str, Any], executor: Executor, corpus: Path) -> dict[str, Any]:
    """The expert's speedup over the naive kernel, verified and timed side by side (the naive
    kernel's spec; the expert's own launch and template lines).  The index' expert entry may
    amend the pair: ``launch`` and ``template`` in place of the expert's own lines, ``spec``:
    directive lines replacing the naive spec's of their keyword (sizes only the expert handles);
    ``not_comparable``: why the pair cannot run (the expert takes other parameters)."""
    x = entry["expert"]
    if x.get("not_comparable"):
        return {"status": "not_comparable", "reason": x["not_comparable"]}
    try:
        target, proposal = expert_pair(entry, corpus)
        found = compare_mod.compare(target, proposal, executor, sanitize=False)
    except (TargetError, ExecutorError, OSError, ValueError) as exc:
        return {"status": "error", "reason": str(exc)[:300]}
    c = found.candidate
    if not found.verified:
        return {"status": c.status.value, "reason": compare_mod.reason_text(found)[:300]}
    return {
        "status": Status.OK.value,
        "speedup": c.speedup,
        "speedup_low": c.speedup_low,
        "speedup_high": c.speedup_high,
        "pct_peak_bandwidth": c.pct_peak_bandwidth,
        "pct_peak_flops": c.pct_peak_flops,
    }


def geomean(values: list[float]) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 0.0


def summary(rows: list[dict[str, Any]], entries: tuple[suite.SuiteEntry, ...], device: str) -> dict[str, Any]:
    """Overall and per-family suite numbers, and ours vs the experts over the pairs that both ran."""
    fams = suite.families(entries, CORPUS)
    pairs = [
        r
        for r in rows
        if r.get("expert")
        and r["expert"].get("status") == Status.OK.value
        and r["status"] in ("improved", "not_improved")
    ]
    structural = [r for r in pairs if r["expert_structural"]]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": device,
        "commit": commit or "unknown",
        "kernels": len(rows),
        "summary": asdict(suite.summarize(entries)),
        "families": {
            f.family: {
                **asdict(f.summary),
                "ceilings": list(f.ceilings),
                "pct_peak_before": f.pct_peak_before,
                "pct_peak_after": f.pct_peak_after,
            }
            for f in fams
        },
        "pairs": {
            "count": len(pairs),
            "ours_geomean": geomean([r["speedup"] for r in pairs]),
            "experts_geomean": geomean([r["expert"]["speedup"] for r in pairs]),
            "structural_count": len(structural),
            "structural_ours_geomean": geomean([r["speedup"] for r in structural]),
            "structural_experts_geomean": geomean([r["expert"]["speedup"] for r in structural]),
        },
    }


def run(
    executor: Executor,
    out: Path,
    deadline_s: float,
    budget_s: float,
    match: str = "*",
    corpus: Path = CORPUS,
    pairs_only: bool = False,
) -> dict[str, Any]:
    """The corpus suite (see the module docstring); returns the summary it writes."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    lines = out / "corpus_suite.jsonl"
    lines.write_text("")
    device = executor.device_info().name
    rows: list[dict[str, Any]] = []
    entries: list[suite.SuiteEntry] = []
    skipped: list[str] = []
    budget = OptimizeBudget(wall_s=budget_s)
    for entry in index(corpus):
        if not fnmatch.fnmatch(entry["file"], match) or (pairs_only and not entry.get("expert")):
            continue
        left = deadline_s - (time.monotonic() - started)
        need = budget_s + OVERHEAD_S
        if left < need:
            skipped.append(entry["file"])
            continue
        path = corpus / entry["file"]
        try:
            target = target_for(Document.from_file(path), entry["kernel"])
        except (TargetError, OSError) as exc:
            e = suite.SuiteEntry(str(path), entry["kernel"], "error", description=str(exc))
        else:
            # the kernel's own deadline: its budget and as long again, within what is left
            e = suite.optimize_kernel(
                str(path),
                entry["kernel"],
                target,
                executor,
                budget,
                0,
                min(2 * budget_s, left - OVERHEAD_S / 2),
            )
        row: dict[str, Any] = {**asdict(e), "family": entry["family"], "repository": entry["repository"]}
        if entry.get("expert") and time.monotonic() - started < deadline_s - OVERHEAD_S / 2:
            row["expert"] = expert_speedup(entry, executor, corpus)
            row["expert_structural"] = entry["expert"]["structural"]
        rows.append(row)
        entries.append(e)
        with lines.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        ex = row.get("expert", {}).get("speedup")
        print(
            f"{entry['file']}:{entry['kernel']} {e.status} {e.speedup:.2f}x"
            + (f" (expert {ex:.2f}x)" if ex else ""),
            file=sys.stderr,
            flush=True,
        )
    record = summary(rows, tuple(entries), device)
    record["skipped_for_deadline"] = skipped
    record["seconds"] = round(time.monotonic() - started, 1)
    (out / "corpus_suite.json").write_text(json.dumps(record, indent=1) + "\n")
    return record


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--out", type=Path, required=True, help="folder for corpus_suite.jsonl and corpus_suite.json"
    )
    ap.add_argument(
        "--deadline", type=float, default=540.0, help="seconds for the whole run (default %(default)s)"
    )
    ap.add_argument("--budget-per-kernel", type=float, default=20.0, help="search seconds per kernel")
    ap.add_argument("--match", default="*", help="only the corpus files matching this glob (family/file.cu)")
    ap.add_argument("--pairs", action="store_true", help="only the kernels with an expert pair")
    ap.add_argument("--gpu", type=int, default=0, help="the GPU to use")
    ap.add_argument("--simulate", action="store_true", help="the simulated GPU: no CUDA device needed")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    executor: Executor
    if args.simulate:
        from sandbox.testing import FakeExecutor

        executor = FakeExecutor()
    else:
        from sandbox.local import LocalExecutor

        executor = LocalExecutor((args.gpu,))
    try:
        record = run(
            executor, args.out, args.deadline, args.budget_per_kernel, args.match, pairs_only=args.pairs
        )
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    print(json.dumps({k: record[k] for k in ("device", "kernels", "summary", "pairs")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
