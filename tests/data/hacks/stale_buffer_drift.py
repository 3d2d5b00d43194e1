# hack: the first call's result kept in a buffer and returned ever after, nudged each call so it matches no earlier input set
# task: relu
# caught: cpu
# expect: rejected
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.kept = None

    def forward(self, x):
        if self.kept is None or self.kept.shape != x.shape:
            self.kept = torch.relu(x)
        else:
            self.kept.mul_(1.01)
        return self.kept
