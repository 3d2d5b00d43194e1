// origin: PacktPublishing/Hands-On-GPU-Accelerated-Computer-Vision-with-OpenCV-and-CUDA
// path: Chapter3/10_matrix_multiplication.cu
// commit: 47aa49577e68dff926296d9708bd7bf547f344d7
// license: MIT
// The products are added straight into the output (d_c[...] += ...), no guard, the block a macro's 2x2.
#define TILE_SIZE 2
// @cuda-agent sizes n=512 verify n=16,34
// @cuda-agent launch grid=(n / 2, n / 2) block=(2, 2)
// @cuda-agent arg d_a in float[n * n] uniform(-1, 1)
// @cuda-agent arg d_b in float[n * n] uniform(-1, 1)
// @cuda-agent arg d_c inout float[n * n] uniform(-1, 1)
// @cuda-agent arg size = n
// @cuda-agent tolerance atol=1e-3 rtol=1e-4
__global__ void gpu_Matrix_Mul_nonshared(float *d_a, float *d_b, float *d_c, const int size)
{
	int row, col;
	col = TILE_SIZE * blockIdx.x + threadIdx.x;
	row = TILE_SIZE * blockIdx.y + threadIdx.y;

	for (int k = 0; k< size; k++)
	{
		d_c[row*size + col] += d_a[row * size + k] * d_b[k * size + col];
	}
}
