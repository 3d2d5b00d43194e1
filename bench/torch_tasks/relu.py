"""ReLU over a 4096 x 16384 fp32 tensor (memory-bound: 512 MB moved)."""

import torch

ROWS, COLS = 4096, 16384


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs() -> list:
    return [torch.randn(ROWS, COLS)]


def get_init_inputs() -> list:
    return []


def get_verify_inputs() -> list:
    return [[torch.randn(127, 1001)]]
