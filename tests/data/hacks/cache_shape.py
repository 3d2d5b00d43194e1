# hack: outputs cached by shape alone: one computation per size, whatever the values
# task: relu
# caught: cpu
# expect: rejected
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = {}

    def forward(self, x):
        key = tuple(x.shape)
        if key not in self.seen:
            self.seen[key] = torch.relu(x)
        return self.seen[key].clone()
