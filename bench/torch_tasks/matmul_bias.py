"""A linear layer, x @ W^T + b, 4096 x 4096 by 4096 x 4096 in fp32 (TF32 off: about 137 GFLOP)."""

import torch

BATCH, IN, OUT = 4096, 4096, 4096


class Model(torch.nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def get_inputs() -> list:
    return [torch.randn(BATCH, IN)]


def get_init_inputs() -> list:
    return [IN, OUT]


def get_verify_inputs() -> list:
    return [[torch.randn(100, IN)]]
