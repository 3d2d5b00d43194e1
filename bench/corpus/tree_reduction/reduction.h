// cuda-agent corpus: header of learn-cuda-programming__reduction_kernel_1.cu and __reduction_kernel_2.cu
// repository: PacktPublishing/Learn-CUDA-Programming
// path: Chapter03/03_cuda_thread_programming/05_warp_divergence/reduction.h
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
#ifndef _REDUCTION_H_
#define _REDUCTION_H_

// @ calling the reduction kernel
int reduction(float *g_outPtr, float *g_inPtr, int size, int n_threads);

#define max(a, b) (a) > (b) ? (a) : (b)

#endif // _REDUCTION_H_