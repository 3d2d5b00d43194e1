"""(a + b) * c over three 4096 x 16384 fp32 tensors: two elementwise kernels a fused one beats."""

import torch

ROWS, COLS = 4096, 16384


class Model(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return (a + b) * c


def get_inputs() -> list:
    return [torch.randn(ROWS, COLS) for _ in range(3)]


def get_init_inputs() -> list:
    return []


def get_verify_inputs() -> list:
    return [[torch.randn(99, 1003) for _ in range(3)]]
