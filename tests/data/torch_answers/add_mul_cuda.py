# answer: (a + b) * c fused into one CUDA kernel built by load_inline (float4 loads where the size allows)
# task: add_mul
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>

__global__ void add_mul4(const float4* a, const float4* b, const float4* c, float4* out, long n4) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 x = a[i], y = b[i], z = c[i];
        out[i] = make_float4((x.x + y.x) * z.x, (x.y + y.y) * z.y, (x.z + y.z) * z.z, (x.w + y.w) * z.w);
    }
}

__global__ void add_mul1(const float* a, const float* b, const float* c, float* out, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) out[i] = (a[i] + b[i]) * c[i];
}

torch::Tensor add_mul(torch::Tensor a, torch::Tensor b, torch::Tensor c) {
    auto out = torch::empty_like(a);
    long n = a.numel(), n4 = n / 4;
    if (n4 > 0) {
        add_mul4<<<(n4 + 255) / 256, 256>>>((const float4*)a.data_ptr<float>(), (const float4*)b.data_ptr<float>(),
                                           (const float4*)c.data_ptr<float>(), (float4*)out.data_ptr<float>(), n4);
    }
    if (n > n4 * 4) {
        add_mul1<<<1, 32>>>(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), out.data_ptr<float>(), n4 * 4, n);
    }
    return out;
}
"""
CPP = "torch::Tensor add_mul(torch::Tensor a, torch::Tensor b, torch::Tensor c);"
ext = load_inline("add_mul_fused", cpp_sources=CPP, cuda_sources=CUDA, functions=["add_mul"], verbose=False)


class ModelNew(torch.nn.Module):
    def forward(self, a, b, c):
        return ext.add_mul(a.contiguous(), b.contiguous(), c.contiguous())
