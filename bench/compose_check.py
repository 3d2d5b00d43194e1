"""Compositions of passes against their steps alone, verified and timed on a GPU.

    python3 bench/compose_check.py --out $OUT          # on a GPU machine (about a minute)

For each kernel of ``tests/data/compose/`` and the kernels of ``bench/kernels/`` where the search
finds compositions (:data:`BENCH`), one request through the sandbox's LocalExecutor: the
compositions the built-in search enumerates (:func:`engine.compose.compositions`, best
prior first, at most ``--chains``) and each of their first steps alone, all with restrict (the
structural rewrite is what differs), verified at the spec's verify sizes and timed at its bench
size against the original.  One JSON line per kernel goes to ``OUT/compose_check.jsonl``: each
candidate's description, status, speedup with its range, and whether it is a composition.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.builtin import Config, subject_for  # noqa: E402
from agent.proposal import Proposal  # noqa: E402
from agent.target import target_for  # noqa: E402
from cudasrc.source import Document  # noqa: E402
from engine import Subject, apply_all, safe_apply  # noqa: E402
from engine.compose import compositions  # noqa: E402
from engine.registry import PASSES, candidates  # noqa: E402

BENCH = ("softmax_one_block.cu", "row_max.cu", "reduce_interleaved.cu", "histogram.cu")


def files() -> list[Path]:
    return [
        *sorted((ROOT / "tests" / "data" / "compose").glob("*.cu")),
        *(ROOT / "bench" / "kernels" / n for n in BENCH),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--chains", type=int, default=4, help="compositions per kernel, best prior first")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    out = args.out / "compose_check.jsonl"
    from sandbox.local import LocalExecutor

    t0 = time.monotonic()
    with LocalExecutor((0,)) as ex, out.open("a", encoding="utf-8") as sink:
        device = ex.device_info()
        for path in files():
            started = time.monotonic()
            t = target_for(Document.from_file(path))
            base = subject_for(t)
            firsts = [(a, s) for a in candidates(device) if isinstance(s := safe_apply(a, base), Subject)]
            chains = compositions(base, firsts, PASSES, device)[: args.chains]
            shapes = list(dict.fromkeys([*(c.steps[0] for c in chains), *chains]))
            batch, rows = [], []
            for k, shape in enumerate(shapes):
                done = apply_all(base, Config(shape=shape, restrict=True).transforms())
                if not isinstance(done, Subject):
                    rows.append({"shape": repr(shape), "status": "not applicable", "message": done.reason})
                    continue
                launch = (
                    done.launch if any((done.launch.grid, done.launch.block, done.launch.shared)) else None
                )
                proposal = Proposal(code=done.code, description="; ".join(done.applied), launch=launch)
                candidate, why = t.candidate(f"c{k}", proposal)
                if candidate is None:
                    rows.append({"shape": repr(shape), "status": "not launched", "message": why})
                    continue
                batch.append((candidate, repr(shape), proposal.description, shape in chains))
            result = ex.evaluate(t.request(f"compose-{path.stem}", tuple(c for c, *_ in batch)))
            by_id = {r.candidate_id: r for r in result.candidates}
            for candidate, shape, description, composed in batch:
                r = by_id[candidate.id]
                rows.append(
                    {
                        "shape": shape,
                        "composed": composed,
                        "description": description,
                        "status": r.status.value,
                        "speedup": [round(r.speedup_low, 3), round(r.speedup, 3), round(r.speedup_high, 3)],
                        "message": r.message[:200],
                    }
                )
            line = {"kernel": path.name, "seconds": round(time.monotonic() - started, 1), "candidates": rows}
            sink.write(json.dumps(line) + "\n")
            sink.flush()
    print(f"wrote {out} in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
