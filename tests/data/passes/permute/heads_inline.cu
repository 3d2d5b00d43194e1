// [b][t][c] -> [b][c][t]: indices written inline, a typedef, the batch guarded too (a block-uniform early return).
typedef int elem_t;
// @cuda-agent sizes b=4 t=19 c=40 verify b=2,4 t=19,19 c=33,40
// @cuda-agent launch grid=(cdiv(c, block_x), cdiv(t, block_y), b) block=(32, 4)
// @cuda-agent arg x in int32[b * t * c] randint(0, 1000)
// @cuda-agent arg y out int32[b * t * c]
// @cuda-agent arg nb = b
// @cuda-agent arg t = t
// @cuda-agent arg c = c
__global__ void heads(const elem_t* x, elem_t* y, int nb, int t, int c) {
    if (blockIdx.z >= nb) return;
    if (blockIdx.x * blockDim.x + threadIdx.x >= c || blockIdx.y * blockDim.y + threadIdx.y >= t) return;
    y[(blockIdx.z * c + blockIdx.x * blockDim.x + threadIdx.x) * t + blockIdx.y * blockDim.y + threadIdx.y] =
        x[(blockIdx.z * t + blockIdx.y * blockDim.y + threadIdx.y) * c + blockIdx.x * blockDim.x + threadIdx.x];
}
