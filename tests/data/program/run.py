"""Stand-in for the multi-file fixture program on a simulated GPU: prints what the real one
prints and writes its results (out.bin: float32, out.txt: text).  ``drift.txt`` in the working
folder (a number) shifts every result by that much: a build step can make the program's
outputs change, as a wrong rewrite would."""

import struct
import sys
from pathlib import Path

drift = float(Path("drift.txt").read_text()) if Path("drift.txt").exists() else 0.0
n = int(sys.argv[1]) if len(sys.argv) > 1 else 100000
values = [2.0 * 1.5 + 0.25 + drift + i * 1e-3 for i in range(64)]
print(f"y[0]={values[0]:g} status=no error n={n}")
Path("out.bin").write_bytes(struct.pack(f"<{len(values)}f", *values))
Path("out.txt").write_text("".join(f"{i} {v:.7f}\n" for i, v in enumerate(values)))
