// GPT-2 encoder backward (llm.c's encoder_backward_kernel1 pattern): each (b, t, c) of the output
// gradient adds into the token-embedding gradient row of its token and the position-embedding
// gradient row of its position, with float atomics: dwte is a 50257 x 768 table (38.6 M floats),
// of which the batch's 8192 tokens touch at most 8192 rows: the work is the gradient read, the
// tokens, and the touched rows of both tables read and written (not the whole table).
// @cuda-agent sizes b=8 t=1024 c=768 v=50257 verify b=1,2 t=7,33 c=5,24 v=11,300
// @cuda-agent launch grid=cdiv(b * t * c, block) block=256
// @cuda-agent arg dwte inout float[v * c] const(0)
// @cuda-agent arg dwpe inout float[t * c] const(0)
// @cuda-agent arg dout in float[b * t * c] uniform(-1, 1)
// @cuda-agent arg inp in int[b * t] randint(0, v)
// @cuda-agent arg B = b
// @cuda-agent arg T = t
// @cuda-agent arg C = c
// @cuda-agent work bytes=4*(b*t*c + b*t + 2*t*c + 2*b*t*c)
__global__ void encoder_backward(float* dwte, float* dwpe, const float* dout, const int* inp,
                                 int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;
    if (idx < N) {
        int bt = idx / C;
        int t = bt % T;
        int c = idx % C;
        int ix = inp[bt];
        float d = dout[idx];
        atomicAdd(&dwte[ix * C + c], d);
        atomicAdd(&dwpe[t * C + c], d);
    }
}
