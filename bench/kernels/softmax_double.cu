// Row softmax, one thread per row, the sum kept in double (llm.c's softmax_forward_kernel1):
// the exponentials are written first and normalised in place by a second pass.
#include <math.h>
// @cuda-agent sizes n=4096 c=2048 verify n=5,70 c=7,100
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg out out float[n * c]
// @cuda-agent arg inp in float[n * c] uniform(-5, 5)
// @cuda-agent arg N = n
// @cuda-agent arg C = c
// @cuda-agent tolerance atol=1e-6 rtol=1e-4
__global__ void softmax_forward_kernel1(float* out, const float* inp, int N, int C) {
    // inp is (N, C)
    // out is (N, C), each row of inp will get softmaxed
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        const float* inp_row = inp + i * C;
        float* out_row = out + i * C;

        float maxval = -INFINITY;
        for (int j = 0; j < C; j++) {
            if (inp_row[j] > maxval) {
                maxval = inp_row[j];
            }
        }
        double sum = 0.0;
        for (int j = 0; j < C; j++) {
            out_row[j] = expf(inp_row[j] - maxval);
            sum += out_row[j];
        }
        for (int j = 0; j < C; j++) {
            out_row[j] /= (float)sum;
        }
    }
}
