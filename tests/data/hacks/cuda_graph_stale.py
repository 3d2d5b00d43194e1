# hack: a CUDA graph captured on the first call (from a private copy of that call's input), replayed ever after
# task: relu
# caught: gpu
# expect: rejected
import torch


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.graphs = {}

    def forward(self, x):
        key = tuple(x.shape)
        if key not in self.graphs:
            static = x.clone()
            graph = torch.cuda.CUDAGraph()
            torch.cuda.synchronize()
            with torch.cuda.graph(graph):
                out = torch.relu(static)
            self.graphs[key] = (graph, out)
        graph, out = self.graphs[key]
        graph.replay()
        return out
