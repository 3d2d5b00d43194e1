// Row L2 normalisation written for a single thread (grid 1, block 1), typedef'd element type.
typedef float scalar_t;
// @cuda-agent sizes n=70 d=33 verify n=3,70 d=5,33
// @cuda-agent launch grid=1 block=1
// @cuda-agent arg a in float[n * d] uniform(-1, 1)
// @cuda-agent arg b out float[n * d]
// @cuda-agent arg n = n
// @cuda-agent arg d = d
// @cuda-agent tolerance atol=1e-6 rtol=1e-4
__global__ void rownorm(const scalar_t* a, scalar_t* b, int n, int d) {
    for (int i = 0; i < n; ++i) {
        scalar_t ss = 0;
        for (int k = 0; k < d; ++k) ss += a[i * d + k] * a[i * d + k];
        scalar_t inv = 1.0f / sqrtf(ss + 1e-6f);
        for (int k = 0; k < d; ++k) b[i * d + k] = a[i * d + k] * inv;
    }
}
