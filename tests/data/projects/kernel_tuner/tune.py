#!/usr/bin/env python
from collections import OrderedDict

import numpy as np
from kernel_tuner import tune_kernel


def tune():
    size = 10000000
    a = np.random.randn(size).astype(np.float32)
    b = np.random.randn(size).astype(np.float32)
    c = np.zeros_like(b)
    n = np.int32(size)
    args = [c, a, b, n]

    tune_params = OrderedDict()
    tune_params["block_size_x"] = [128, 256, 512, 1024]
    tune_params["tile_size_x"] = [2, 4, 8]

    return tune_kernel(
        "vector_add", "vector_add.cu", size, args, tune_params, grid_div_x=["block_size_x", "tile_size_x"]
    )


if __name__ == "__main__":
    tune()
