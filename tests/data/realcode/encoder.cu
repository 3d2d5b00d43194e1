/*
Kernels for the positional encoder forward pass in GPT-2: token embedding + position embedding.
*/
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
#include "common.h"

// out[b,t,:] = wte[inp[b,t],:] + wpe[t,:]   (wpe is read, never written)
__global__ void encoder_forward_kernel2(floatX* out, const int* inp, floatX* wte, floatX* wpe,
                                        int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;
    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;
        int ix = inp[b * T + t];
        floatX* out_btc = out + b * T * C + t * C + c;
        const floatX* wte_ix = wte + ix * C + c;
        const floatX* wpe_tc = wpe + t * C + c;
        *out_btc = (floatX)((float)*wte_ix + (float)*wpe_tc);
    }
}

void encoder_forward2(floatX* out, const int* inp, floatX* wte, floatX* wpe,
                      int B, int T, int C, const int block_size) {
    const int N = B * T * C;
    const int grid_size = ceil_div(N, block_size);
    encoder_forward_kernel2<<<grid_size, block_size>>>(out, inp, wte, wpe, B, T, C);
    cudaCheck(cudaGetLastError());
}

int main(int argc, char** argv) {
    srand(0);
    int B = 8;
    int T = 1024;
    int C = 768;
    int V = 50257;

    int* inp = make_random_int(B * T, V);

    floatX *d_out, *d_wte, *d_wpe;
    int* d_inp;
    cudaCheck(cudaMalloc(&d_out, B * T * C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_inp, B * T * sizeof(int)));
    cudaCheck(cudaMalloc(&d_wte, V * C * sizeof(floatX)));
    cudaCheck(cudaMalloc(&d_wpe, T * C * sizeof(floatX)));
    cudaCheck(cudaMemcpy(d_inp, inp, B * T * sizeof(int), cudaMemcpyHostToDevice));

    int block_sizes[] = {32, 64, 128, 256, 512, 1024};
    for (int j = 0; j < sizeof(block_sizes) / sizeof(int); j++) {
        int block_size = block_sizes[j];
        encoder_forward2(d_out, d_inp, d_wte, d_wpe, B, T, C, block_size);
    }
    free(inp);
    return 0;
}
