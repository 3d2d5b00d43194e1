# hack: outputs cached by the input's address and shape: the same tensor is never computed twice
# task: relu
# caught: cpu
# expect: rejected
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.seen = {}

    def forward(self, x):
        key = (x.data_ptr(), tuple(x.shape))
        if key not in self.seen:
            self.seen[key] = torch.relu(x)
        return self.seen[key]
