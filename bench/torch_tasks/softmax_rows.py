"""Softmax over the rows of a 4096 x 16384 fp32 tensor."""

import torch

ROWS, COLS = 4096, 16384


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs() -> list:
    return [torch.randn(ROWS, COLS) * 4]


def get_init_inputs() -> list:
    return []


def get_verify_inputs() -> list:
    return [[torch.randn(61, 3000) * 4]]
