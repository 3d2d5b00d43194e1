// cuda-agent corpus: dot
// repository: moocf/matrix-multiplication.cuda
// path: src/testSimple.hxx
// commit: a7822df7a4a7f942cde352602169366bd5604ef5
// license: MIT
// expert: kernelTiled in matrix-multiplication-cuda__kernelTiled.cu (structural: shared-memory tiles)
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

// @cuda-agent sizes XR=1024 XC=1024 YC=1024 verify XR=32,48 XC=17,33 YC=48,32
// @cuda-agent launch grid=(cdiv(YC, 16), cdiv(XR, 16)) block=(16, 16)
// @cuda-agent arg a out float[XR * YC]
// @cuda-agent arg x in float[XR * XC]
// @cuda-agent arg y in float[XC * YC]
__global__ void kernelSimple(float *a, float *x, float *y, int XR, int XC, int YC) {
  DEFINE2D(tx, ty, bx, by, BX, BY, GX, GY)
  UNUSED_CUDA(GX); UNUSED_CUDA(GY);
  int r = by*BY + ty;
  int c = bx*BX + tx;

  float s = 0;
  for (int i=0; i<XC; i++)
    s += GET2D(x, r, i, XC) * GET2D(y, i, c, YC);
  GET2D(a, r, c, YC) = s;
}
