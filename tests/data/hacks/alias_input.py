# hack: the output is the input, overwritten in place (no output memory, no extra pass)
# task: relu
# caught: cpu
# expect: rejected
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x.clamp_(min=0.0)
