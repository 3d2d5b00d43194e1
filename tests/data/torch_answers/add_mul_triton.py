# answer: (a + b) * c fused into one Triton kernel (one pass over memory where eager makes two), autotuned
# task: add_mul
import torch
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 1024}, num_warps=4),
        triton.Config({"BLOCK": 4096}, num_warps=8),
    ],
    key=["n"],
)
@triton.jit
def add_mul_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    c = tl.load(c_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, (a + b) * c, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, a, b, c):
        a, b, c = a.contiguous(), b.contiguous(), c.contiguous()
        out = torch.empty_like(a)
        n = out.numel()
        add_mul_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](a, b, c, out, n)
        return out
