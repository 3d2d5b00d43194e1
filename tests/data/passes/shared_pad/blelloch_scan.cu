// A work-efficient (Blelloch) exclusive scan of 2 * blockDim.x elements (HeCBench's scan): the
// up- and down-sweeps touch `temp[offset * (2 * thid + 1) - 1]`, 2, 4 ... 256 elements apart from
// one thread to the next: every warp's accesses land on a few banks.
#define N 512
// @cuda-agent sizes n=4096 verify n=1536
// @cuda-agent launch grid=cdiv(n, 512) block=256
// @cuda-agent arg g_odata out float[n]
// @cuda-agent arg g_idata in float[n] uniform(-1, 1)
// @cuda-agent tolerance atol=1e-4
__global__ void blelloch(float* g_odata, const float* g_idata) {
    __shared__ float temp[N];
    const float* gi = g_idata + blockIdx.x * N;
    float* go = g_odata + blockIdx.x * N;
    int thid = threadIdx.x;
    int offset = 1;
    temp[2 * thid] = gi[2 * thid];
    temp[2 * thid + 1] = gi[2 * thid + 1];
    for (int d = N >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (thid < d) {
            int ai = offset * (2 * thid + 1) - 1;
            int bi = offset * (2 * thid + 2) - 1;
            temp[bi] += temp[ai];
        }
        offset *= 2;
    }
    if (thid == 0) temp[N - 1] = 0;
    for (int d = 1; d < N; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (thid < d) {
            int ai = offset * (2 * thid + 1) - 1;
            int bi = offset * (2 * thid + 2) - 1;
            float t = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += t;
        }
    }
    __syncthreads();
    go[2 * thid] = temp[2 * thid];
    go[2 * thid + 1] = temp[2 * thid + 1];
}
