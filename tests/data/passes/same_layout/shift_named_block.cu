// origin: jarnesino/cuda-reduction-optimization, reduce_implementations/1_interleaved_addressing_with_divergent_branching.cu, commit 3172198334c0320fc9ae58b5995cde9dbdbf7d55
// license: none stated in the repository; the kernel as upstream wrote it (its trailing comment left out)
// The block size under a local name, the stride doubled by a shift (`% (s << 1)`).
// @cuda-agent sizes dataSize=1<<22 verify dataSize=1024,4096
// @cuda-agent launch grid=cdiv(dataSize, 256) block=256 smem=256*4
// @cuda-agent arg inputData in int32[dataSize] randint(-100, 100)
// @cuda-agent arg outputData out int32[cdiv(dataSize, 256)]
// @cuda-agent arg dataSize = dataSize
__global__ void interleaved_addressing_with_divergent_branching(
        int *inputData, int *outputData, unsigned int dataSize
) {
    extern __shared__ int sharedData[];

    // Load one element from global to shared memory in each thread.
    unsigned int blockSize = blockDim.x;
    unsigned int blockIndex = blockIdx.x;
    unsigned int threadBlockIndex = threadIdx.x;
    unsigned int threadIndex = blockIndex * blockSize + threadBlockIndex;
    sharedData[threadBlockIndex] = inputData[threadIndex];
    __syncthreads();

    // Do reduction in shared memory.
    for (unsigned int numberOfElementsReduced = 1; numberOfElementsReduced < blockSize; numberOfElementsReduced <<= 1) {
        if (threadBlockIndex % (numberOfElementsReduced << 1) == 0) {  // This instruction produces divergent branching.
            sharedData[threadBlockIndex] += sharedData[threadBlockIndex + numberOfElementsReduced];
        }
        __syncthreads();
    }

    // Write this block's result in shared memory.
    if (threadBlockIndex == 0) outputData[blockIndex] = sharedData[0];
}
