"""A PyTorch program calling a custom CUDA kernel through torch.utils.cpp_extension.load_inline."""

import sys
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
ext = load_inline(
    name="relu_scale_ext",
    cpp_sources="torch::Tensor relu_scale_launch(torch::Tensor x, double s);",
    cuda_sources=(Path(__file__).parent / "relu_scale.cu").read_text(),
    functions=["relu_scale_launch"],
    build_directory=sys.argv[2] if len(sys.argv) > 2 else None,
)
x = torch.linspace(-1, 1, n, device="cuda")
y = ext.relu_scale_launch(x, 2.0)
torch.cuda.synchronize()
print("y[-1] =", float(y[-1]))
