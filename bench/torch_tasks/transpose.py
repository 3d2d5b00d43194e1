"""A contiguous transpose of an 8192 x 8192 fp32 matrix."""

import torch

N = 8192


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous()


def get_inputs() -> list:
    return [torch.randn(N, N)]


def get_init_inputs() -> list:
    return []


def get_verify_inputs() -> list:
    return [[torch.randn(1000, 77)]]
