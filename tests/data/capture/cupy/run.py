"""A Python program launching a custom CUDA kernel through CuPy's RawKernel."""

import sys
from pathlib import Path

import cupy as cp

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 1
kernel = cp.RawKernel((Path(__file__).parent / "saxpy.cu").read_text(), "saxpy")
x = cp.full(n, 1.5, dtype=cp.float32)
y = cp.full(n, 0.5, dtype=cp.float32)
block = 256
for _ in range(repeat):
    kernel(((n + block - 1) // block,), (block,), (cp.float32(3.0), x, y, cp.int32(n)))
cp.cuda.Device().synchronize()
print("y[0] =", float(y[0]))
