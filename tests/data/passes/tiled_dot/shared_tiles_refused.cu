// refused: its threads cooperate
// origin: PacktPublishing/Hands-On-GPU-Accelerated-Computer-Vision-with-OpenCV-and-CUDA, Chapter3/10_matrix_multiplication.cu, commit 47aa49577e68dff926296d9708bd7bf547f344d7
// license: MIT; the expert's shared-memory kernel of the same file, already tiled
#define TILE_SIZE 2
// @cuda-agent sizes n=512 verify n=16,34
// @cuda-agent launch grid=(n / 2, n / 2) block=(2, 2)
// @cuda-agent arg d_a in float[n * n] uniform(-1, 1)
// @cuda-agent arg d_b in float[n * n] uniform(-1, 1)
// @cuda-agent arg d_c inout float[n * n] const(0)
// @cuda-agent arg size = n
__global__ void gpu_Matrix_Mul_shared(float *d_a, float *d_b, float *d_c, const int size)
{
	int row, col;
	//Defining Shared Memory
	__shared__ float shared_a[TILE_SIZE][TILE_SIZE];
	__shared__ float shared_b[TILE_SIZE][TILE_SIZE];
	col = TILE_SIZE * blockIdx.x + threadIdx.x;
	row = TILE_SIZE * blockIdx.y + threadIdx.y;

	for (int i = 0; i< size / TILE_SIZE; i++) 
	{
		shared_a[threadIdx.y][threadIdx.x] = d_a[row* size + (i*TILE_SIZE + threadIdx.x)];
		shared_b[threadIdx.y][threadIdx.x] = d_b[(i*TILE_SIZE + threadIdx.y) * size + col];
		__syncthreads(); 
		for (int j = 0; j<TILE_SIZE; j++)
			d_c[row*size + col] += shared_a[threadIdx.y][j] * shared_b[j][threadIdx.x];
		__syncthreads(); 

	}
}
