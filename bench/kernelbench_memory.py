"""The memory plan of every KernelBench task file, without a GPU (issue 36).

For each ``level*/*.py`` of a KernelBench checkout: the task's own device memory at its benchmark
size (inputs, outputs, parameters: :func:`sandbox.torch_eval.footprint`, shapes from the meta
device) and what one evaluation plans to hold (:attr:`sandbox.torch_eval.TaskMemory.planned`),
against an 80 GB H100.  Writes one JSON document:

    python3 bench/kernelbench_memory.py --kernelbench /path/to/KernelBench/KernelBench --out bench/results/kernelbench_memory.json

Needs torch (the CPU wheel does); files whose model cannot be built here are listed with why.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sandbox.torch_eval import PLAN_FACTOR, PLAN_OVERHEAD, footprint

DEVICE_BYTES = 80 * 10**9  # an H100's 80 GB


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernelbench", required=True, help="folder holding level1/, level2/, level3/")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    root = Path(args.kernelbench)
    rows: list[dict[str, Any]] = []
    for path in sorted(root.glob("level*/*.py")):
        name = str(path.relative_to(root))
        try:
            fp = footprint(path.read_text())
        except Exception as exc:  # a task this host cannot build: listed, not planned
            rows.append({"file": name, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
            continue
        rows.append(
            {
                "file": name,
                "inputs": fp.inputs,
                "outputs": fp.outputs,
                "params": fp.params,
                "footprint": fp.total,
                "planned": fp.planned,
                "within_plan": fp.planned <= PLAN_FACTOR * fp.total + PLAN_OVERHEAD,
                "fits_80gb": fp.planned <= DEVICE_BYTES,
            }
        )
    planned = [r for r in rows if "planned" in r]
    doc = {
        "what": "planned device memory of one evaluation per KernelBench file (sandbox.torch_eval.TaskMemory)",
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "device_bytes": DEVICE_BYTES,
        "plan_factor": PLAN_FACTOR,
        "plan_overhead": PLAN_OVERHEAD,
        "files": len(rows),
        "planned": len(planned),
        "all_fit": all(r["fits_80gb"] and r["within_plan"] for r in planned),
        "largest": sorted(planned, key=lambda r: -r["footprint"])[:20],
        "rows": rows,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"{len(planned)}/{len(rows)} planned, all fit: {doc['all_fit']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
