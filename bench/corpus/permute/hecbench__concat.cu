// cuda-agent corpus: permute
// repository: zjin-lcf/HeCBench
// path: src/concat-cuda/main.cu
// commit: f27000a5188f8ac79bd43fc95a1b3f890c18823d
// license: Apache-2.0
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection and the lines between `// added` and `// end added`.
// added
// from src/concat-cuda/reference.h (same repository and commit):
__host__ __device__
int flat_3dim(int id1, int id2, int id3, int dim2, int dim3) {
  return id1 * dim2 * dim3 + id2 * dim3 + id3;
}
// end added
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <chrono>
#include <cuda.h>

// @cuda-agent template float
// @cuda-agent sizes b=384 d=128 s1=300 s2=724 verify b=3,5 d=7,33 s1=5,2 s2=11,9
// @cuda-agent launch grid=cdiv(b * d * (s1 + s2), block) block=256
// @cuda-agent arg inp1 in float[b * s1 * d]
// @cuda-agent arg inp2 in float[b * s2 * d]
// @cuda-agent arg output out float[b * (s1 + s2) * d]
// @cuda-agent arg sz0 = b
// @cuda-agent arg sz2 = d
// @cuda-agent arg sz1_1 = s1
// @cuda-agent arg sz1_2 = s2
template <typename T>
__global__
void concat (const T *__restrict__ inp1,
             const T *__restrict__ inp2,
                   T *output,
             int sz0, int sz2, int sz1_1, int sz1_2)
{
  int nele = sz0 * sz2 * (sz1_1 + sz1_2);
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= nele) return;

  float *dst_ptr = (float *)output + idx;
  int idx2 = idx % sz2;
  idx = idx / sz2;
  int idx1 = idx % (sz1_1 + sz1_2);
  int idx0 = idx / (sz1_1 + sz1_2);
  float *src_ptr;
  int sz1;
  if (idx1 < sz1_1) {
    sz1 = sz1_1;
    src_ptr = (float *)inp1;
  } else {
    idx1 -= sz1_1;
    sz1 = sz1_2;
    src_ptr = (float *)inp2;
  }
  src_ptr += flat_3dim(idx0, idx1, idx2, sz1, sz2);
  *dst_ptr = *src_ptr;
}
