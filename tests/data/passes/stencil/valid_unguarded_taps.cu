// origin: nickvido/creativecomputing, cc.creativecomputing/dev/cc/creativecomputing/opencl/programmingguide/Convolution.cl
// (the OpenCL Programming Guide's convolve, Munshi et al.)
// license: the book's sample code as redistributed there; written as CUDA here: get_global_id(0/1)
// -> blockIdx * blockDim + threadIdx, get_global_size(0) -> gridDim.x * blockDim.x, `global`/`constant`
// qualifiers dropped.  A "valid" convolution: taps `input[(y + r) * inputWidth + x + c]` with no
// bounds check and no guard, the grid exactly the output.
// @cuda-agent sizes H=36 W=52 M=5 verify H=20,36 W=20,52 M=5,5
// @cuda-agent launch grid=(cdiv(W - M + 1, 16), cdiv(H - M + 1, 16)) block=(16, 16)
// @cuda-agent arg input in int32[H * W] randint(0, 100)
// @cuda-agent arg mask in int32[M * M] randint(0, 4)
// @cuda-agent arg output out int32[(H - M + 1) * (W - M + 1)]
// @cuda-agent arg inputWidth = W
// @cuda-agent arg maskWidth = M
__global__ void convolve(
	const int * const input,
	const int * const mask,
	int * const output,
	const int inputWidth,
	const int maskWidth
){
	const int x = blockIdx.x * blockDim.x + threadIdx.x;
	const int y = blockIdx.y * blockDim.y + threadIdx.y;

	int sum = 0;

	for (int r = 0; r < maskWidth; r++) {
		const int idxIntmp = (y + r) * inputWidth + x;
		for (int c = 0; c < maskWidth; c++) {
			sum += mask[(r * maskWidth) + c] * input[idxIntmp + c];
		}
	}
	output[y * (gridDim.x * blockDim.x) + x] = sum;
}
