// A 7-point Laplacian on a 3-D grid with a 3-D launch (one thread per interior point).
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

__global__ void laplacian7(const float* __restrict__ in, float* __restrict__ out, int nx, int ny, int nz,
                           float h2inv) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = blockIdx.y * blockDim.y + threadIdx.y;
    int k = blockIdx.z * blockDim.z + threadIdx.z;
    if (i < 1 || j < 1 || k < 1 || i >= nx - 1 || j >= ny - 1 || k >= nz - 1) return;
    size_t c = (size_t)k * ny * nx + (size_t)j * nx + i;
    size_t sx = 1, sy = nx, sz = (size_t)nx * ny;
    out[c] = h2inv * (in[c - sx] + in[c + sx] + in[c - sy] + in[c + sy] + in[c - sz] + in[c + sz] - 6.0f * in[c]);
}

int main() {
    const int nx = 256, ny = 256, nz = 128;
    const float h = 1.0f / (nx - 1);
    std::vector<float> h_in(nx * ny * nz, 1.0f);
    float *d_in, *d_out;
    cudaMalloc(&d_in, h_in.size() * sizeof(float));
    cudaMalloc(&d_out, nx * ny * nz * sizeof(float));
    dim3 block(8, 8, 4);
    dim3 grid((nx + block.x - 1) / block.x, (ny + block.y - 1) / block.y, (nz + block.z - 1) / block.z);
    laplacian7<<<grid, block>>>(d_in, d_out, nx, ny, nz, 1.0f / (h * h));
    cudaDeviceSynchronize();
    return 0;
}
