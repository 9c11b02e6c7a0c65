/*
SwiGLU, the gated unit of the Llama FFN: g = silu(h1) * h3. CPU twin:
llmc/cpu/swiglu.h. Elementwise, one thread per element (grid-stride, size_t
indices), fp32 math, expf (not the fast intrinsic). Scalar loads only, so any
size and any alignment work (the hidden-chunked FFN hands in arbitrary slices).
swiglu_backward allows dh1 == dout: each thread reads its element of dout, h1 and
h3 before it writes dh1 and dh3.
*/
#pragma once
#include "common.h"

__global__ void swiglu_forward_kernel(floatX* out, const floatX* h1, const floatX* h3, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float a = (float)h1[i];
        out[i] = (floatX)(a / (1.0f + expf(-a)) * (float)h3[i]);
    }
}

__global__ void swiglu_backward_kernel(floatX* dh1, floatX* dh3, const floatX* dout, const floatX* h1,
                                       const floatX* h3, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float a = (float)h1[i], b = (float)h3[i], g = (float)dout[i];
        float sig = 1.0f / (1.0f + expf(-a));
        float silu = a * sig;
        dh3[i] = (floatX)(g * silu);
        dh1[i] = (floatX)(g * b * sig * (1.0f + a * (1.0f - sig)));
    }
}

static inline unsigned swiglu_blocks(size_t n, int block) {
    size_t blocks = ceil_div(n, block);
    return (unsigned)(blocks > 65536 ? 65536 : blocks);
}

static inline void swiglu_forward(floatX* out, const floatX* h1, const floatX* h3, size_t n, stream_t s) {
    if (n == 0) return;
    swiglu_forward_kernel<<<swiglu_blocks(n, 256), 256, 0, s>>>(out, h1, h3, n);
    cudaCheck(cudaGetLastError());
}

// dh1 may alias dout (each element is read before it is written)
static inline void swiglu_backward(floatX* dh1, floatX* dh3, const floatX* dout, const floatX* h1, const floatX* h3, size_t n,
                            stream_t s) {
    if (n == 0) return;
    swiglu_backward_kernel<<<swiglu_blocks(n, 256), 256, 0, s>>>(dh1, dh3, dout, h1, h3, n);
    cudaCheck(cudaGetLastError());
}
