# hack: the output is a tensor subclass (whose methods could compute on access instead of in forward)
# task: relu
# caught: cpu
# expect: rejected
import torch


class Lazy(torch.Tensor):
    pass


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x).as_subclass(Lazy)
