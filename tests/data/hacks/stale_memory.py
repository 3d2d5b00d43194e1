# hack: the output is fresh memory never written, hoping the allocator hands back a block that held the reference's output
# task: relu
# caught: gpu
# expect: rejected
import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
