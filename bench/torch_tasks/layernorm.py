"""LayerNorm over the last dimension (8192, with its weight and bias) of an 8192 x 8192 fp32 tensor."""

import torch

ROWS, FEATURES = 8192, 8192


class Model(torch.nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(features)
        with torch.no_grad():  # not the identity affine map, so a kernel that ignores it fails
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs() -> list:
    return [torch.randn(ROWS, FEATURES) * 2 + 1]


def get_init_inputs() -> list:
    return [FEATURES]


def get_verify_inputs() -> list:
    return [[torch.randn(37, FEATURES) * 2 + 1]]
