# hack: a global forward hook (no assignment) that makes every other module's forward do more work
# task: matmul_bias
# caught: screen
# expect: rejected
import torch


def _slower(module, args, output):
    if not isinstance(module, ModelNew):
        for _ in range(4):
            output = output + 0.0
    return output


torch.nn.modules.module.register_module_forward_hook(_slower)


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.addmm(self.linear.bias, x, self.linear.weight.t())
