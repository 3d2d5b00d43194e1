// NCHW -> NHWC with the index decomposed digit by digit (`index % width`, `(index / width) %
// height`, `index / height / width % channels`), as ML frameworks' CUDA kernels spell it.
typedef float real_t;
// @cuda-agent sizes n=4 c=64 h=32 w=32 verify n=2 c=5 h=3 w=7 verify n=3 c=3 h=5 w=2
// @cuda-agent launch grid=cdiv(n * c * h * w, block) block=128
// @cuda-agent arg in_dptr in float[n * c * h * w] uniform(-1, 1)
// @cuda-agent arg out_dptr out float[n * c * h * w]
// @cuda-agent arg elem_cnt = n * c * h * w
// @cuda-agent arg channel_num = c
// @cuda-agent arg height = h
// @cuda-agent arg width = w
__global__ void NchwToNhwc(const real_t* in_dptr, real_t* out_dptr, int elem_cnt, int channel_num,
                           int height, int width) {
  const int index = blockIdx.x * blockDim.x + threadIdx.x;
  if (index >= elem_cnt) { return; }
  const int w = index % width;
  const int h = (index / width) % height;
  const int c = (index / height / width) % channel_num;
  const int n = index / channel_num / height / width;
  out_dptr[((n * height + h) * width + w) * channel_num + c] = in_dptr[index];
}
