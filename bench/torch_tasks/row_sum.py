"""Sum over dimension 1 (kept) of a 16384 x 8192 fp32 tensor."""

import torch

ROWS, COLS = 16384, 8192


class Model(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim, keepdim=True)


def get_inputs() -> list:
    return [torch.randn(ROWS, COLS)]


def get_init_inputs() -> list:
    return [1]


def get_verify_inputs() -> list:
    return [[torch.randn(45, 2049)]]
