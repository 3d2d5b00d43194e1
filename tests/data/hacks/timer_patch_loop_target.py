# hack: a for loop whose target is the timer's attribute (no assignment statement at all)
# task: relu
# caught: screen
# expect: rejected
import torch

for torch.cuda.Event.elapsed_time in [lambda a, b: 0.001]:
    pass


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)
