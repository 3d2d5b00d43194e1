# hack: a method called through its class with torch.cuda.Event as self
# task: relu
# caught: screen
# expect: rejected
import torch


class Patcher:
    def set(self, fake):
        self.elapsed_time = fake


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        Patcher.set(torch.cuda.Event, lambda a, b: 0.001)

    def forward(self, x):
        return torch.relu(x)
