// cuda-agent corpus: dot
// repository: moocf/matrix-multiplication.cuda
// path: src/testTiled.hxx
// commit: a7822df7a4a7f942cde352602169366bd5604ef5
// license: MIT
// expert pair of: matrix-multiplication-cuda__kernelSimple.cu
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection and the lines between `// added` and `// end added`.
// added
// from src/_cuda.hxx and src/_vector.hxx (same repository and commit):
#ifndef DEFINE_CUDA
#define DEFINE_CUDA(t, b, B, G) \
  const int t = threadIdx.x; \
  const int b = blockIdx.x; \
  const int B = blockDim.x; \
  const int G = gridDim.x;
#define DEFINE_CUDA2D(tx, ty, bx, by, BX, BY, GX, GY) \
  const int tx = threadIdx.x; \
  const int ty = threadIdx.y; \
  const int bx = blockIdx.x; \
  const int by = blockIdx.y; \
  const int BX = blockDim.x; \
  const int BY = blockDim.y; \
  const int GX = gridDim.x;  \
  const int GY = gridDim.y;
#endif

#ifndef DEFINE
#define DEFINE(t, b, B, G) \
  DEFINE_CUDA(t, b, B, G)
#define DEFINE2D(tx, ty, bx, by, BX, BY, GX, GY) \
  DEFINE_CUDA2D(tx, ty, bx, by, BX, BY, GX, GY)
#endif




// UNUSED
// ------
// Mark CUDA kernel variables as unused.

template <class T>
__device__ void unusedCuda(T&&) {}

#ifndef UNUSED_CUDA
#define UNUSED_CUDA(x) unusedCuda(x)
#endif

#ifndef UNUSED
#define UNUSED UNUSED_CUDA
#endif
#define GET2D(x, r, c, C) (x)[(r)*(C) + (c)]
// end added

const int TILEDX = 16;
const int TILEDY = 16;

// @cuda-agent sizes XR=1024 XC=1024 YC=1024 verify XR=32,48 XC=16,32 YC=48,32
// @cuda-agent launch grid=(cdiv(YC, 16), cdiv(XR, 16)) block=(16, 16)
// @cuda-agent arg a out float[XR * YC]
// @cuda-agent arg x in float[XR * XC]
// @cuda-agent arg y in float[XC * YC]
__global__ void kernelTiled(float *a, float *x, float *y, int XR, int XC, int YC) {
  DEFINE2D(tx, ty, bx, by, BX, BY, GX, GY)
  UNUSED_CUDA(GX); UNUSED_CUDA(GY);
  __shared__ float as[TILEDY * TILEDX];
  __shared__ float xs[TILEDY * TILEDX];
  __shared__ float ys[TILEDY * TILEDX];

  int r = by*BY + ty;
  int c = bx*BX + tx;
  GET2D(as, ty, tx, BX) = 0;

  for (int i=0; i<XC; i+=BX) {
    __syncthreads();
    GET2D(xs, ty, tx, BX) = GET2D(x, r, i+tx, XC);
    GET2D(ys, ty, tx, BX) = GET2D(y, i+ty, c, YC);
    __syncthreads();
    for (int j=0; j<BX; j++)
      GET2D(as, ty, tx, BX) += GET2D(xs, ty, j, BX) * GET2D(ys, j, tx, BX);
  }
  __syncthreads();
  GET2D(a, r, c, YC) = GET2D(as, ty, tx, BX);
}
