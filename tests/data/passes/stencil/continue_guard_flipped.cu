// origin: NTNU-HPC-Lab/LS-CAT, data/kernels/14424/6/convn_same_kernel.cu
// license: LS-CAT dataset (kernels collected from public repositories); the kernel as stored there
// The guard is `if (outside) continue;` inside the tap loops, the filter flipped (`y - i + i0`).
// @cuda-agent sizes H=45 W=37 kH=5 kW=5 verify H=9,45 W=5,37 kH=3,5 kW=5,3
// @cuda-agent launch grid=(cdiv(H, block_x), cdiv(W, block_y)) block=(16, 16)
// @cuda-agent arg output out float[H * W]
// @cuda-agent arg data in float[H * W] uniform(-1, 1)
// @cuda-agent arg kernel in float[kH * kW] uniform(-1, 1)
// @cuda-agent arg H = H
// @cuda-agent arg W = W
// @cuda-agent arg kH = kH
// @cuda-agent arg kW = kW
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void convn_same_kernel(float *output, float *data, float *kernel, const int H, const int W, const int kH, const int kW) {

// Matrix index
const int x = blockIdx.x*blockDim.x + threadIdx.x;
const int y = blockIdx.y*blockDim.y + threadIdx.y;

if (x >= H || y >= W)
return;

const int i0 = kW / 2, j0 = kH / 2;

float sum = 0;
for (int i = 0; i < kW; ++i) {
for(int j = 0; j < kH; ++j) {
int ii = y - i + i0;
int jj = x - j + j0;

if ( ii < 0 || ii >= W || jj < 0 || jj >= H )
continue;

sum += kernel[ i * kH + j ] * data[ ii * H + jj ];
}
}

output[y * H + x] = sum;
}
