// origin: NTNU-HPC-Lab/LS-CAT, data/kernels/15641/16/reduce_v1.cu (the strided-index form `index = 2*s*tx`: no modulo, but bank conflicts)
// license: LS-CAT dataset (kernels collected from public repositories); the kernel as stored there, THEAD_MAX defined here
#define THEAD_MAX 256
// @cuda-agent sizes n=1<<20 verify n=1000,4097
// @cuda-agent launch grid=cdiv(n, 256) block=256
// @cuda-agent arg in in float[n] uniform(-1, 1)
// @cuda-agent arg out out float[cdiv(n, 256)]
// @cuda-agent arg n = n
// @cuda-agent tolerance atol=1e-4 rtol=1e-4
__global__ void reduce_v1(float* in,float* out, int n){
int tx = threadIdx.x;
int bx = blockIdx.x;
int BX = blockDim.x; //same as THEAD_MAX
int i  = bx*BX+tx;

__shared__ float S[THEAD_MAX];

S[tx] = i < n ?  in[i] : 0;
__syncthreads();
for(int s=1; s<BX ;s*=2){
int index = 2*s*tx;
if(index < BX)
S[index] += S[index+s];
__syncthreads();
}
if(tx==0)
out[bx] = S[0];
}
