// origin: NTNU-HPC-Lab/LS-CAT, data/kernels/14541/3/MatrixMulKernel.cu
// license: LS-CAT dataset (kernels collected from public repositories); the kernel as stored
// there, its includes.h's BLOCK_SIZE defined here.  The block's width written as the macro, no guard.
#define BLOCK_SIZE 16
// @cuda-agent sizes W=1024 verify W=32,80
// @cuda-agent launch grid=(W / 16, W / 16) block=(16, 16)
// @cuda-agent arg Md in float[W * W] uniform(-1, 1)
// @cuda-agent arg Nd in float[W * W] uniform(-1, 1)
// @cuda-agent arg Pd out float[W * W]
// @cuda-agent arg Width = W
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__ void MatrixMulKernel(float* Md, float* Nd, float* Pd, int Width)
{
// Calculate the row index of the Pd element and M
int Row = blockIdx.y*BLOCK_SIZE + threadIdx.y;
// Calculate the column idenx of Pd and N
int Col = blockIdx.x*BLOCK_SIZE + threadIdx.x;
float Pvalue = 0;
// each thread computes one element of the block sub-matrix
for (int k = 0; k < Width; ++k)
Pvalue += Md[Row*Width+k] * Nd[k*Width+Col];
Pd[Row*Width+Col] = Pvalue;
}
