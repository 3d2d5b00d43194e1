// Index forms of real code the structural rewrites must see through: the global index held in
// variables, `size_t` casts, either operand order, a 1-D index split by `/` and `%` with the
// guard on its parts, early returns, a bin written `&(h[k])` or `h + k`.

// @cuda-agent sizes rows=4096 cols=2048 verify rows=33,70 cols=31,100
// @cuda-agent launch grid=cdiv(rows * cols, block) block=256
// @cuda-agent arg src in float[rows * cols] uniform(-1, 1)
// @cuda-agent arg dst out float[rows * cols]
// @cuda-agent arg rows = rows
// @cuda-agent arg cols = cols
__global__ void transpose_split(const float* src, float* dst, int rows, int cols) {
    const int tid = threadIdx.x;
    const int gid = tid + blockIdx.x * blockDim.x;
    const int r = gid / cols;
    const int c = gid % cols;
    if (r < rows && c < cols) {
        dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
    }
}

// @cuda-agent sizes h=4096 w=2048 verify h=33,70 w=31,100
// @cuda-agent launch grid=(cdiv(w, block_x), cdiv(h, block_y)) block=(16, 16)
// @cuda-agent arg a in double[h * w] uniform(-1, 1)
// @cuda-agent arg b out double[h * w]
// @cuda-agent arg h = h
// @cuda-agent arg w = w
__global__ void transpose_return(const double* a, double* b, int h, int w) {
    int col = threadIdx.x + blockDim.x * blockIdx.x;
    int row = threadIdx.y + blockDim.y * blockIdx.y;
    if (col >= w || h <= row) return;
    b[h * col + row] = a[col + row * w];
}

// @cuda-agent sizes n=1<<24 verify n=1001,4099
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg data in int[n] randint(0, 1024)
// @cuda-agent arg bins inout unsigned int[128] const(0)
// @cuda-agent arg n = n
__global__ void histogram_offset(const int* data, unsigned int* bins, int n) {
    int t = threadIdx.x;
    size_t i = (size_t)blockDim.x * blockIdx.x + t;
    if ((size_t)n > i) {
        int bin = data[i] >> 3;
        atomicAdd(bins + bin, 1u);
    }
}

// A running sum across the elements of one thread cannot become a loop over elements.
// @cuda-agent sizes n=1<<20
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
__global__ void carried(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 1.0f;
    if (i < n) {
        acc *= x[i];
        y[i] = acc;
    }
}

// A lane computed before the index: the body depends on the thread's position through it.
// @cuda-agent sizes n=1<<20
// @cuda-agent launch grid=cdiv(n, block) block=256
// @cuda-agent arg x in float[n]
// @cuda-agent arg y out float[n]
// @cuda-agent arg n = n
__global__ void lane_before(const float* x, float* y, int n) {
    int lane = threadIdx.x & 31;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] + (float)lane;
}
