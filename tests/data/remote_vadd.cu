// Vector add, the kernel the remote-worker tests and bench/remote_gpu_eval.py send to a worker.
// Candidates vary the launch bound (256 -> 128/256/512...).

extern "C" __global__ void __launch_bounds__(256) vadd(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
