// A "valid" convolution as the issue quotes it (`sum += in[(y + j) * W + (x + i)] * f[j * F + i]`):
// the output guarded by its own size (`outW = W - K + 1`), the taps not guarded at all.
// (written here in the spelling of OpenCL course code, conv2d with valid padding)
// @cuda-agent sizes H=40 W=50 K=5 verify H=9,40 W=9,50 K=3,5
// @cuda-agent launch grid=(cdiv(W - K + 1, block_x), cdiv(H - K + 1, block_y)) block=(16, 16)
// @cuda-agent arg image in float[H * W] uniform(-1, 1)
// @cuda-agent arg ker in float[K * K] uniform(-1, 1)
// @cuda-agent arg output out float[(H - K + 1) * (W - K + 1)]
// @cuda-agent arg H = H
// @cuda-agent arg W = W
// @cuda-agent arg K = K
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void conv2d(const float* image, const float* ker, float* output, const int H, const int W, const int K)
{
    int outW = W - K + 1;
    int outH = H - K + 1;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if(col < outW && row < outH) {
        float sum = 0.0f;
        for (int i = 0; i < K; i++) {
            for (int j = 0; j < K; j++) {
                sum += image[(row + i)*W + (col + j)] * ker[i*K + j];
            }
        }
        output[row*outW + col] = sum;
    }
}
