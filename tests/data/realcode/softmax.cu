// Harness for the softmax kernel of kernels.cuh: attention scores (B, NH, T, T) softmaxed per row.
#include <stdio.h>
#include <stdlib.h>
#include <cmath>
#include <cuda_runtime.h>
#include "common.h"
#include "kernels.cuh"

void softmax_forward1(float* out, const float* inp, int N, int C, const int block_size) {
    const int grid_size = ceil_div(N, block_size);
    softmax_forward_kernel1<<<grid_size, block_size>>>(out, inp, N, C);
    cudaCheck(cudaGetLastError());
}

int main(int argc, char** argv) {
    int B = 8;
    int T = 1024;
    int NH = 12;

    float* d_out;
    float* d_inp;
    cudaCheck(cudaMalloc(&d_out, B * NH * T * T * sizeof(float)));
    cudaCheck(cudaMalloc(&d_inp, B * NH * T * T * sizeof(float)));

    int block_sizes[] = {128, 256, 512};
    for (int j = 0; j < 3; j++) {
        int block_size = block_sizes[j];
        softmax_forward1(d_out, d_inp, B * NH * T, T, block_size);
    }
    return 0;
}
