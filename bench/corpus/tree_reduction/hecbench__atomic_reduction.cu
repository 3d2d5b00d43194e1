// cuda-agent corpus: tree_reduction
// repository: zjin-lcf/HeCBench
// path: src/atomicReduction-cuda/kernels.h
// commit: f27000a5188f8ac79bd43fc95a1b3f890c18823d
// license: MIT
// expert: atomic_reduction_v2 (not structural: two loads per grid-stride step)
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
// @cuda-agent sizes n=52428800 verify n=1000,4096
// @cuda-agent launch grid=min(2048, cdiv(n, block)) block=256
// @cuda-agent arg in in int[n] randint(-100, 100)
// @cuda-agent arg out inout int[1] const(0)
// @cuda-agent arg arrayLength = n
__global__ void atomic_reduction(int *in, int* out, int arrayLength) {
  int sum=0;
  int idx = blockIdx.x*blockDim.x+threadIdx.x;
  for(int i= idx;i<arrayLength;i+=blockDim.x*gridDim.x) {
    sum+=in[i];
  }
  atomicAdd(out,sum);
}

// @cuda-agent sizes n=52428800 verify n=1000,4096
// @cuda-agent launch grid=min(2048, cdiv(n, block)) block=256
// @cuda-agent arg in in int[n] randint(-100, 100)
// @cuda-agent arg out inout int[1] const(0)
// @cuda-agent arg arrayLength = n
__global__ void atomic_reduction_v2(int *in, int* out, int arrayLength) {
  int sum=0;
  int idx = blockIdx.x*blockDim.x+threadIdx.x;
  for(int i= idx*2;i<arrayLength;i+=blockDim.x*gridDim.x*2) {
    sum+=in[i] + in[i+1];
  }
  atomicAdd(out,sum);
}
