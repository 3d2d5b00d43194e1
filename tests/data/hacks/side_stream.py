# hack: the work runs on a stream of its own, never joined: the caller's stream (and its timer) never waits for it
# task: matmul_bias
# caught: gpu
# expect: rejected
import torch


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = torch.nn.Linear(in_features, out_features)
        self.stream = torch.cuda.Stream()

    def forward(self, x):
        out = torch.empty(x.shape[0], self.linear.out_features, device=x.device)
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            torch.addmm(self.linear.bias, x, self.linear.weight.t(), out=out)
        return out
