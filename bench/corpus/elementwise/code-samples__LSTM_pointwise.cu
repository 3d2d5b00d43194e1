// cuda-agent corpus: elementwise
// repository: NVIDIA-developer-blog/code-samples
// path: posts/rnn/LSTM.cu
// commit: 72d62ec464442786a36754508bcb1094d197d6a5
// license: BSD-3-Clause
// Upstream text, unchanged but for `// @cuda-agent` spec lines and the kernels' selection.
/* Copyright (c) 1993-2016, NVIDIA CORPORATION. All rights reserved.
 *
 * Redistribution and use in source and binary forms, with or without
 * modification, are permitted provided that the following conditions
 * are met:
 *  * Redistributions of source code must retain the above copyright
 *    notice, this list of conditions and the following disclaimer.
 *  * Redistributions in binary form must reproduce the above copyright
 *    notice, this list of conditions and the following disclaimer in the
 *    documentation and/or other materials provided with the distribution.
 *  * Neither the name of NVIDIA CORPORATION nor the names of its
 *    contributors may be used to endorse or promote products derived
 *    from this software without specific prior written permission.
 *
 * THIS SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS ``AS IS'' AND ANY
 * EXPRESS OR IMPLIED WARRANTIES, INCLUDING, BUT NOT LIMITED TO, THE
 * IMPLIED WARRANTIES OF MERCHANTABILITY AND FITNESS FOR A PARTICULAR
 * PURPOSE ARE DISCLAIMED.  IN NO EVENT SHALL THE COPYRIGHT OWNER OR
 * CONTRIBUTORS BE LIABLE FOR ANY DIRECT, INDIRECT, INCIDENTAL, SPECIAL,
 * EXEMPLARY, OR CONSEQUENTIAL DAMAGES (INCLUDING, BUT NOT LIMITED TO,
 * PROCUREMENT OF SUBSTITUTE GOODS OR SERVICES; LOSS OF USE, DATA, OR
 * PROFITS; OR BUSINESS INTERRUPTION) HOWEVER CAUSED AND ON ANY THEORY
 * OF LIABILITY, WHETHER IN CONTRACT, STRICT LIABILITY, OR TORT
 * (INCLUDING NEGLIGENCE OR OTHERWISE) ARISING IN ANY WAY OUT OF THE USE
 * OF THIS SOFTWARE, EVEN IF ADVISED OF THE POSSIBILITY OF SUCH DAMAGE.
 */
 
 
/*
 Compile:

// Device functions
__forceinline__ __device__ float sigmoidf(float in) {
   return 1.f / (1.f + expf(-in));  
}

// Pointwise functions
// @cuda-agent sizes h=512 b=64 verify h=33,17 b=3,5
// @cuda-agent launch grid=cdiv(h * b, block) block=128
// @cuda-agent arg y inout float[h * b]
// @cuda-agent arg bias in float[h]
// @cuda-agent arg n = h * b
// @cuda-agent arg nBias = h
__global__ void pw_biasAdd(float *y, float *bias, int n, int nBias) {
   int i = blockIdx.x * blockDim.x + threadIdx.x;
   if (i < n) y[i] += bias[i % nBias];
}

// @cuda-agent sizes n=512*64 verify n=1001,77
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg y out float[n]
// @cuda-agent arg a in float[n]
// @cuda-agent arg b in float[n]
// @cuda-agent arg n = n
__global__ void pw_vecAdd(float *y, float *a,  float *b, int n) {
   int i = blockIdx.x * blockDim.x + threadIdx.x;
   if (i < n) y[i] = a[i] + b[i];
}

// @cuda-agent sizes n=512*64 verify n=1001,77
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg y out float[n]
// @cuda-agent arg a in float[n]
// @cuda-agent arg b in float[n]
// @cuda-agent arg n = n
__global__ void pw_vecMul(float *y, float *a,  float *b, int n) {
   int i = blockIdx.x * blockDim.x + threadIdx.x;
   if (i < n) y[i] = a[i] * b[i];
}

// @cuda-agent sizes n=512*64 verify n=1001,77
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg y out float[n]
// @cuda-agent arg a in float[n]
// @cuda-agent arg n = n
__global__ void pw_tanh(float *y, float *a, int n) {
   int i = blockIdx.x * blockDim.x + threadIdx.x;
   if (i < n) y[i] = tanh(a[i]);
}

// @cuda-agent sizes n=512*64 verify n=1001,77
// @cuda-agent launch grid=cdiv(n, block) block=128
// @cuda-agent arg y out float[n]
// @cuda-agent arg a in float[n]
// @cuda-agent arg n = n
__global__ void pw_sigmoid(float *y, float *a, int n) {
   int i = blockIdx.x * blockDim.x + threadIdx.x;
   if (i < n) y[i] = sigmoidf(a[i]);
}

// Fused forward kernel
// @cuda-agent sizes h=512 b=64 verify h=33,17 b=3,5
// @cuda-agent launch grid=cdiv(h * b, block) block=256
// @cuda-agent arg hiddenSize = h
// @cuda-agent arg miniBatch = b
// @cuda-agent arg tmp_h in float[4 * h * b]
// @cuda-agent arg tmp_i in float[4 * h * b]
// @cuda-agent arg bias in float[8 * h]
// @cuda-agent arg linearGates = NULL
// @cuda-agent arg h_out out float[h * b]
// @cuda-agent arg i_out out float[h * b]
// @cuda-agent arg c_in in float[h * b]
// @cuda-agent arg c_out out float[h * b]
// @cuda-agent arg training = 0
__global__ void elementWise_fp(int hiddenSize, int miniBatch,
                               float *tmp_h, 
                               float *tmp_i, 
                               float *bias,
                               float *linearGates,
                               float *h_out,
                               float *i_out,
                               float *c_in,
                               float *c_out,
                               bool training) {
   int index = blockIdx.x * blockDim.x + threadIdx.x;
   int numElements = miniBatch * hiddenSize;
   
   if (index >= numElements) return;
   
   int batch = index / hiddenSize;
   int gateIndex = (index % hiddenSize) + 4 * batch * hiddenSize;   
   
   float g[4];

   for (int i = 0; i < 4; i++) {
      g[i] = tmp_i[i * hiddenSize + gateIndex] + tmp_h[i * hiddenSize + gateIndex];
      g[i] += bias[i * hiddenSize + index % hiddenSize] + bias[(i + 4) * hiddenSize + index % hiddenSize];
      
      if (training) linearGates[gateIndex + i * hiddenSize] = g[i];
   }   
   
   
   float in_gate     = sigmoidf(g[0]);
   float forget_gate = sigmoidf(g[1]);
   float in_gate2    = tanhf(g[2]);
   float out_gate    = sigmoidf(g[3]);
   
   float val = (forget_gate * c_in[index]) + (in_gate * in_gate2);
   
   c_out[index] = val;
   
   val = out_gate * tanhf(val);                                   

   h_out[index] = val;
   i_out[index] = val;
}
