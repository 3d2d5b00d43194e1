# answer: ReLU as one CUDA kernel built by load_inline, 16-byte loads and stores, on torch's current stream
# task: level1/19_ReLU
import torch
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu4(const float4* __restrict__ x, float4* __restrict__ y, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 v = x[i];
        y[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f), fmaxf(v.z, 0.f), fmaxf(v.w, 0.f));
    }
}

__global__ void relu1(const float* __restrict__ x, float* __restrict__ y, long start, long n) {
    long i = start + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat32, "a float32 CUDA tensor");
    x = x.contiguous();
    auto y = torch::empty_like(x);
    long n = x.numel(), n4 = n / 4;
    auto stream = at::cuda::getCurrentCUDAStream();
    if (n4 > 0) {
        int blocks = (int)std::min<long>((n4 + 255) / 256, 65535L * 8);
        relu4<<<blocks, 256, 0, stream>>>((const float4*)x.data_ptr<float>(), (float4*)y.data_ptr<float>(), n4);
    }
    if (n > n4 * 4) relu1<<<1, 32, 0, stream>>>(x.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    return y;
}
"""
CPP = "torch::Tensor relu(torch::Tensor x);"
ext = load_inline("kb1_relu", cpp_sources=CPP, cuda_sources=CUDA, functions=["relu"], verbose=False)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return ext.relu(x)
