// Scan of each row of 64 doubles by a block of 64 threads (a block per row), writing the row's total too.
// @cuda-agent sizes rows=7 verify rows=3,7
// @cuda-agent launch grid=rows block=64
// @cuda-agent arg x in double[rows * 64] uniform(-1, 1)
// @cuda-agent arg y out double[rows * 64]
// @cuda-agent arg total out double[rows]
// @cuda-agent tolerance atol=1e-9 rtol=1e-9
__global__ void row_scan(const double* x, double* y, double* total) {
    __shared__ double row[64];
    int tid = threadIdx.x;
    row[tid] = x[blockIdx.x * 64 + tid];
    __syncthreads();
    for (int stride = 1; stride < 64; stride += stride) {
        double v = tid >= stride ? row[tid - stride] : 0.0;
        __syncthreads();
        row[tid] = v + row[tid];
        __syncthreads();
    }
    y[blockIdx.x * 64 + tid] = row[tid];
    if (tid == 63) total[blockIdx.x] = row[63];
}
