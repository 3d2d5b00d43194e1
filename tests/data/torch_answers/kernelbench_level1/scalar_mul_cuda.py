# answer: a matrix times a scalar as one CUDA kernel built by load_inline, 16-byte loads and stores
# task: level1/5_Matrix_scalar_multiplication
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void scale4(const float4* __restrict__ a, float s, float4* __restrict__ c, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = a[i];
        c[i] = make_float4(v.x * s, v.y * s, v.z * s, v.w * s);
    }
}

__global__ void scale1(const float* __restrict__ a, float s, float* __restrict__ c, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] * s;
}

torch::Tensor scale(torch::Tensor a, double s) {
    TORCH_CHECK(a.is_cuda() && a.scalar_type() == torch::kFloat32, "a float32 CUDA tensor");
    a = a.contiguous();
    auto c = torch::empty_like(a);
    long n = a.numel(), n4 = n / 4;
    auto stream = at::cuda::getCurrentCUDAStream();
    if (n4 > 0) {
        int blocks = (int)std::min<long>((n4 + 255) / 256, 65535L * 8);
        scale4<<<blocks, 256, 0, stream>>>((const float4*)a.data_ptr<float>(), (float)s, (float4*)c.data_ptr<float>(), n4);
    }
    if (n > n4 * 4) scale1<<<1, 32, 0, stream>>>(a.data_ptr<float>(), (float)s, c.data_ptr<float>(), n4 * 4, n);
    return c;
}
"""
CPP = "torch::Tensor scale(torch::Tensor a, double s);"
ext = load_inline("kb1_scale", cpp_sources=CPP, cuda_sources=CUDA, functions=["scale"], verbose=False)


class ModelNew(torch.nn.Module):
    def forward(self, A, s):
        return ext.scale(A, s)
