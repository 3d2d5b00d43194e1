"""Issue 37 on a real host: what isolates untrusted compiles and GPU workers here, and whether the
trigraph include probes return anything of a file under any ``-std``.

    python3 bench/isolation_check.py --out $OUT/isolation --deadline 120    # the GPU machine
    python3 bench/isolation_check.py --out /tmp/iso --deadline 60 --simulate  # any machine (CPU)

Writes JSON lines to ``--out/isolation_check.jsonl`` as it goes, and stops itself inside
``--deadline`` seconds:

- ``host``: Landlock ABI, whether bubblewrap is installed, the compile isolation
  (:func:`sandbox.compile_pool.compile_isolation`) and the GPU worker's bwrap prefix: which
  folders it hides;
- ``homes``: what ``ls -A /home /root`` shows inside the GPU worker's bwrap (nothing expected;
  ``no bwrap``: PyTorch answers are refused here);
- ``probes`` (one per ``-std``): each trigraph include probe compiled by NVRTC unguarded (does it
  read the secret file: the probe is real) and untrusted, in this process and in the isolated
  compile pool (leaks: must be 0).

Needs only NVRTC (``cuda-bindings``), the repository's ``sandbox`` package and Python 3.11+;
``--simulate`` marks the rows as a CPU dry run (everything here runs without a GPU).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandbox.compile_pool import CompilePool, compile_isolation  # noqa: E402
from sandbox.compiler import compile_cuda  # noqa: E402
from sandbox.confine import landlock_abi  # noqa: E402
from sandbox.contract import to_json  # noqa: E402
from sandbox.isolation import bwrap_prefix  # noqa: E402

KERNEL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.f; }\n'
SECRET = "ISOLATION-CHECK-SECRET-5521"
STDS = (None, "c++03", "c++11", "c++14", "c++17", "c++20")


def probes(secret: Path) -> dict[str, str]:
    s = str(secret)
    return {
        "comment ??/": f'// x ??/\n#include "{s}"\n',
        "string ending ??/": f'const char* t = "a??/";\n#include "{s}"\n',
        "open string ??/": f'const char* t = "??/\n#include "{s}"\n";\n',
        "stringizer": f'#define S(x) #x\nstatic_assert(false, S(\n// x ??/\n#include "{s}"\n));\n',
        "??= directive": f'??=include "{s}"\n',
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds; the script stops inside it")
    parser.add_argument("--simulate", action="store_true", help="a CPU dry run (rows say so)")
    args = parser.parse_args()
    end = time.monotonic() + args.deadline - 5
    args.out.mkdir(parents=True, exist_ok=True)
    out = (args.out / "isolation_check.jsonl").open("a")

    def row(kind: str, **fields: Any) -> None:
        out.write(json.dumps({"kind": kind, "simulate": args.simulate, **fields}) + "\n")
        out.flush()

    prefix = list(bwrap_prefix())
    hidden = [prefix[i + 1] for i, a in enumerate(prefix) if a == "--tmpfs"]
    row(
        "host",
        landlock_abi=landlock_abi(),
        bwrap=shutil.which("bwrap") is not None,
        compile_isolation=compile_isolation(),
        gpu_worker_bwrap=bool(prefix),
        gpu_worker_hides=hidden,
    )
    if prefix:
        shown = subprocess.run(
            [*prefix, "ls", "-A", "/home", "/root"], capture_output=True, text=True, timeout=30
        )
        row("homes", visible=[line for line in shown.stdout.splitlines() if line and not line.endswith(":")])
    else:
        row("homes", visible=None, note="no bwrap: PyTorch answers are refused here")
    with tempfile.TemporaryDirectory() as tmp:
        secret = Path(tmp) / "secret"
        secret.write_text(f"LINE_{SECRET} = 1\n")
        pool = CompilePool(1)
        try:
            for std in STDS:
                if time.monotonic() > end:
                    row("stopped", reason="deadline")
                    break
                options = (f"-std={std}",) if std else ()
                real, leaks = [], []
                for name, probe in probes(secret).items():
                    source = probe + KERNEL
                    if (
                        SECRET
                        in compile_cuda(
                            source, name_expressions=("k",), options=options, trusted=True
                        ).result.log
                    ):
                        real.append(name)
                    direct = compile_cuda(source, name_expressions=("k",), options=options).result
                    pooled = pool.submit(source, name_expressions=("k",), options=options).result(timeout=120)
                    if SECRET in to_json(direct) or SECRET in to_json(pooled.result):
                        leaks.append(name)
                row(
                    "probes",
                    std=std or "default",
                    unguarded_reads=real,
                    leaks=leaks,
                    isolation=pool.isolation,
                )
        finally:
            pool.close()
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
