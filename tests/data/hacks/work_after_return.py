# hack: forward returns while its kernels still run behind other work on a second stream
# task: relu
# caught: gpu
# expect: rejected
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stream = torch.cuda.Stream()

    def forward(self, x):
        out = torch.empty_like(x)
        self.stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(self.stream):
            pad = torch.randn(2048, 2048, device=x.device)
            for _ in range(8):
                pad = pad @ pad.t() / 2048.0
            torch.clamp(x, min=0.0, out=out)
        return out
