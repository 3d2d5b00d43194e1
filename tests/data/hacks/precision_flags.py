# hack: TF32 turned on through a call (no attribute assignment): matmul at 10 mantissa bits
# task: matmul_bias
# caught: cpu
# expect: rejected
import torch


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)
        torch.set_float32_matmul_precision("high")

    def forward(self, x):
        return self.linear(x)
