// origin: PacktPublishing/Learn-CUDA-Programming
// path: Chapter07/07_parallel_programming_pattern/02_convolution/convolution.cu
// commit: 10bd9b59bfcc680d608ea1417da5089f73d91b11
// license: MIT
// The tap under a ternary whose condition tree-sitter reads as a template argument list
// (`image_row >= 0 && image_row < num_row && image_col >= 0 ...`): the front end parenthesizes it.
// @cuda-agent sizes rows=512 cols=512 fs=5 verify rows=17,48 cols=33,64 fs=5,3
// @cuda-agent launch grid=(cdiv(cols, 16), cdiv(rows, 16)) block=(16, 16)
// @cuda-agent arg d_output out float[cdiv(rows, 16) * 16 * cdiv(cols, 16) * 16]
// @cuda-agent arg d_input in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg d_filter in float[fs * fs] uniform(-1, 1)
// @cuda-agent arg num_row = rows
// @cuda-agent arg num_col = cols
// @cuda-agent arg filter_size = fs
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void
convolution_kernel_v1(float *d_output, float *d_input, float *d_filter, int num_row, int num_col, int filter_size)
{
    int idx_x = blockDim.x * blockIdx.x + threadIdx.x;
    int idx_y = blockDim.y * blockIdx.y + threadIdx.y;

    float result = 0.f;
    for (int filter_row = -filter_size / 2; filter_row <= filter_size / 2; ++filter_row)
    {
        for (int filter_col = -filter_size / 2; filter_col <= filter_size / 2; ++filter_col)
        {
            // Find the global position to apply the given filter
            int image_row = idx_y + filter_row;
            int image_col = idx_x + filter_col;

            float image_value = (image_row >= 0 && image_row < num_row && image_col >= 0 && image_col < num_col) ?
                                            d_input[image_row * num_col + image_col] : 0.f;
            float filter_value = d_filter[(filter_row + filter_size / 2) * filter_size + filter_col + filter_size / 2];

            result += image_value * filter_value;
        }
    }

    d_output[idx_y * num_col + idx_x] = result;
}
