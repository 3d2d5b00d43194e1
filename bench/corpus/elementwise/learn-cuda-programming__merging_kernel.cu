// cuda-agent corpus: elementwise
// repository: PacktPublishing/Learn-CUDA-Programming
// path: Chapter06/06_multigpu/05_streams/image_merging.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include<stdio.h>
#include<stdlib.h>

// @cuda-agent sizes w=1024 h=1024 verify w=64,96 h=8,40
// @cuda-agent launch grid=(w / 32, h / 8) block=(32, 8)
// @cuda-agent arg in1 in uint8_t[w * h] randint(0, 256)
// @cuda-agent arg in2 in uint8_t[w * h] randint(0, 256)
// @cuda-agent arg out out uint8_t[w * h]
// @cuda-agent arg w = w
// @cuda-agent arg h = h
// @cuda-agent arg lower = 0
// @cuda-agent arg upper = h
__global__
void merging_kernel(unsigned char *in1, unsigned char*in2,unsigned char *out, long w, long h, int lower, int upper)
{
        int x = blockDim.x * blockIdx.x + threadIdx.x;
        int y = (blockDim.y * blockIdx.y + threadIdx.y);
        int index = y*w+x;
        out[index] = (in1[index]+in2[index])/2;

}
