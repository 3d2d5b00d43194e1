// origin: jhlee508/reduction-cuda, kernels/1_interleaved.cu, commit 1b88e214652b51ec31ac99dd49a2f8b146b49eb3
// license: none stated in the repository; the kernel as upstream wrote it
// @cuda-agent sizes size=1<<22 verify size=1000,4097
// @cuda-agent launch grid=cdiv(size, 512) block=512 smem=512*8
// @cuda-agent arg arr in double[size] uniform(-1, 1)
// @cuda-agent arg size = size
// @cuda-agent arg res out double[cdiv(size, 512)]
// @cuda-agent tolerance atol=1e-9 rtol=1e-9
__global__ void interleaved_kernel(double* arr, int size, double* res) {
  extern __shared__ double s_arr[];

  int lid = threadIdx.x;
  int gid = blockIdx.x * blockDim.x + threadIdx.x;

  /* 1. Load to SMEM */
  s_arr[lid] = (gid < size) ? arr[gid] : 0;
  __syncthreads(); 

  /* 2. Reduction in SMEM */
  for (int s = 1; s < blockDim.x; s *= 2) { // s = 1, 2, 4, ..., (BLOCK_SIZE/2)
    if (lid % (2 * s) == 0) { // lid: (0, 2, ..., BLOCK_SIZE-2), (0, 4, ..., BLOCK_SIZE-4), ...
      s_arr[lid] += s_arr[lid + s];
    }
    __syncthreads();
  }

  /* 3. Store to GMEM */
  if (lid == 0) { res[blockIdx.x] = s_arr[0]; }
}
