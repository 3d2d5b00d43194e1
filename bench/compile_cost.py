"""Per-candidate cost of compiling inside the boundary, next to the compile as it was.

    python bench/compile_cost.py --out bench/results              # any machine: NVRTC needs no GPU

Compiles ``--n`` distinct small kernels (a CUDA header included, so the include scan and the
header reads are part of the cost) in each mode and appends one JSON line per mode to
``--out/compile_cost.jsonl`` as it goes (date, git commit, host, NVRTC version):

- ``trusted_in_process``: ``compile_cuda(trusted=True)``, the compile as it was (no checks);
- ``untrusted_in_process``: ``compile_cuda()``, the same plus the boundary's checks (options,
  filename, include scan);
- ``pool_unsandboxed``: ``CompilePool(sandbox=False)``, a compile worker process, JSON both ways;
- ``pool_sandboxed``: ``CompilePool()``, the same isolated as this host allows (bubblewrap and/or
  Landlock, with the compile limits of ``sandbox.confine``; the row's ``isolation`` says which).

Per mode: the median, first and third quartile of the per-candidate milliseconds (the pool's start-up
and its first compile are reported apart, as ``first_ms``).  Stops a mode after ``--max-s`` seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox.compile_pool import CompilePool  # noqa: E402
from sandbox.compiler import Compiled, compile_cuda, nvrtc_version  # noqa: E402

SOURCE = """#include <cuda_fp16.h>
extern "C" __global__ void k{i}(const float* __restrict__ x, __half* y, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = __float2half(x[i] * {i}.5f + 1.f);
}}
"""


def commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        return out.stdout.strip()
    except OSError:
        return ""


def measure(name: str, compile_one: Callable[[str, str], Compiled], start: int, n: int, max_s: float) -> dict:
    """Compile ``n`` distinct sources; the first one's time apart (warm-up / pool start)."""
    times: list[float] = []
    first = 0.0
    began = time.perf_counter()
    for i in range(start, start + n + 1):
        t = time.perf_counter()
        out = compile_one(SOURCE.format(i=i), f"k{i}")
        elapsed = (time.perf_counter() - t) * 1e3
        if not out.result.ok or out.result.cached:
            raise SystemExit(f"{name}: compile {i} failed or was cached: {out.result.log[:300]}")
        if i == start:
            first = elapsed
        else:
            times.append(elapsed)
        if time.perf_counter() - began > max_s:
            break
    q1, med, q3 = statistics.quantiles(times, n=4) if len(times) >= 2 else (times * 3 or [0.0] * 3)
    return {
        "mode": name,
        "median_ms": med,
        "q1_ms": q1,
        "q3_ms": q3,
        "first_ms": first,
        "compiles": len(times),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--n", type=int, default=30, help="distinct kernels per mode")
    parser.add_argument("--max-s", type=float, default=50.0, help="seconds per mode at most")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "compile_cost.jsonl"
    meta = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": commit(),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "nvrtc": nvrtc_version(),
        "command": "python bench/compile_cost.py " + " ".join(sys.argv[1:]),
    }
    seed = int(time.time()) % 100_000 * 1000  # distinct sources on every run: no cache hits

    def in_process(trusted: bool) -> Callable[[str, str], Compiled]:
        return lambda src, name: compile_cuda(src, name_expressions=(name,), trusted=trusted)

    def pooled(pool: CompilePool) -> Callable[[str, str], Compiled]:
        return lambda src, name: pool.submit(src, name_expressions=(name,)).result(timeout=120)

    modes: list[tuple[str, Callable[[], tuple[Callable[[str, str], Compiled], Callable[[], None], str]]]] = [
        ("trusted_in_process", lambda: (in_process(True), lambda: None, "none")),
        ("untrusted_in_process", lambda: (in_process(False), lambda: None, "none")),
    ]
    for name, sandbox in (("pool_unsandboxed", False), ("pool_sandboxed", True)):

        def make(sandbox: bool = sandbox) -> tuple[Callable[[str, str], Compiled], Callable[[], None], str]:
            pool = CompilePool(1, sandbox=sandbox)
            return pooled(pool), pool.close, pool.isolation

        modes.append((name, make))
    for k, (name, make) in enumerate(modes):
        t = time.perf_counter()
        compile_one, close, isolation = make()
        setup_ms = (time.perf_counter() - t) * 1e3
        try:
            if name == "pool_sandboxed" and isolation == "none":
                row = {"mode": name, "skipped": "neither bubblewrap nor Landlock is usable here"}
            else:
                row = measure(name, compile_one, seed + 10_000 * k, args.n, args.max_s)
                row["setup_ms"] = setup_ms
                row["isolation"] = isolation
        finally:
            close()
        row["load_average"] = os.getloadavg()[0]  # other work on the machine slows every mode
        with path.open("a") as f:
            f.write(json.dumps({**meta, **row}) + "\n")
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
