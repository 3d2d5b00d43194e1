// cuda-agent corpus: permute
// repository: zjin-lcf/HeCBench
// path: src/channelShuffle-cuda/main.cu
// commit: f27000a5188f8ac79bd43fc95a1b3f890c18823d
// license: BSD-3-Clause
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <chrono>
#include <cuda.h>
#include "reference.h"

#define NUM_THREADS 256
#define GridDimMaxY 65536

// @cuda-agent template float, false
// @cuda-agent sizes n=16 g=2 k=64 hw=224*224 verify n=3,2 g=3,2 k=5,7 hw=299,1031
// @cuda-agent launch grid=(cdiv(hw, 256), n, g * k) block=256
// @cuda-agent arg G = g
// @cuda-agent arg K = k
// @cuda-agent arg HxW = hw
// @cuda-agent arg X in float[n * g * k * hw]
// @cuda-agent arg Y out float[n * g * k * hw]
template <typename T, bool kNFirst>
__global__ void ChannelShuffleNCHWKernel(
    const int G,
    const int K,
    const int HxW,
    const T* X,
          T* Y)
{
  const int C = G * K;
  const int n = kNFirst ? blockIdx.x : blockIdx.y;
  const int s = kNFirst ? blockIdx.y : blockIdx.x;
  const int g = blockIdx.z % G;
  const int k = blockIdx.z / G;
  const int offset = s * NUM_THREADS + threadIdx.x;
  if (offset < HxW) {
    Y[(n * C + blockIdx.z) * HxW + offset] =
        __ldg(X + (n * C + g * K + k) * HxW + offset);
  }
}

// @cuda-agent template float, 128
// @cuda-agent sizes n=16 g=2 k=64 hw=224*224 verify n=3,2 g=3,2 k=5,7 hw=29,31
// @cuda-agent launch grid=n * hw block=256
// @cuda-agent arg G = g
// @cuda-agent arg K = k
// @cuda-agent arg X in float[n * hw * g * k]
// @cuda-agent arg Y out float[n * hw * g * k]
template <typename T, int kSharedSize>
__global__ void
ChannelShuffleNHWCKernel(const int G, const int K, const T* X, T* Y)
{
  __shared__ T sdata[kSharedSize];
  const int C = G * K;
  const int offset = blockIdx.x * C;
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    sdata[i] = __ldg(X + offset + i);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    const int g = i % G;
    const int k = i / G;
    Y[offset + i] = sdata[g * K + k];
  }
}
