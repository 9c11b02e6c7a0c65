/*
The pointwise activations of the video DiT (docs/design.md 9.3), forward and backward.
CPU twin: llmc/kernels/cpu/activation.h.
  gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))   the FFN (fc1 -> fc2)
  silu(x) = x / (1 + exp(-x))                                       the conditioning c
Elementwise, one thread per element (grid-stride, size_t indices), fp32 math with
the accurate tanhf/expf (not the fast intrinsics), one rounding when stored. Scalar
loads, so any size and any alignment work; dev/cuda/activation.cu has the 16-byte
vector version. The backward overwrites dinp and allows dinp == dout: each thread
reads its element of dout and inp before it writes dinp. Elementwise, so deterministic.
*/
#pragma once
#include "../core/common.h"

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

__global__ void gelu_tanh_forward_kernel(floatX* out, const floatX* inp, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = (float)inp[i];
        float t = tanhf(GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x));
        out[i] = (floatX)(0.5f * x * (1.0f + t));
    }
}

// d/dx gelu_tanh = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
__global__ void gelu_tanh_backward_kernel(floatX* dinp, const floatX* dout, const floatX* inp, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = (float)inp[i], g = (float)dout[i];
        float t = tanhf(GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x));
        float du = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * x * x);
        dinp[i] = (floatX)(g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du));
    }
}

__global__ void silu_forward_kernel(floatX* out, const floatX* inp, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = (float)inp[i];
        out[i] = (floatX)(x / (1.0f + expf(-x)));
    }
}

// d/dx silu = sig (1 + x (1 - sig)), sig = 1 / (1 + exp(-x))
__global__ void silu_backward_kernel(floatX* dinp, const floatX* dout, const floatX* inp, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float x = (float)inp[i], g = (float)dout[i];
        float sig = 1.0f / (1.0f + expf(-x));
        dinp[i] = (floatX)(g * sig * (1.0f + x * (1.0f - sig)));
    }
}

// the grid of an elementwise launch: at most 65536 blocks, the loops stride over the rest
static inline unsigned activation_blocks(size_t n, int block) {
    size_t blocks = ceil_div(n, block);
    return (unsigned)(blocks > 65536 ? 65536 : blocks);
}

static inline void gelu_tanh_forward(floatX* out, const floatX* inp, size_t n, stream_t s) {
    if (n == 0) return;
    gelu_tanh_forward_kernel<<<activation_blocks(n, 256), 256, 0, s>>>(out, inp, n);
    cudaCheck(cudaGetLastError());
}

// dinp = dout * gelu_tanh'(inp), overwritten; dinp may alias dout
static inline void gelu_tanh_backward(floatX* dinp, const floatX* dout, const floatX* inp, size_t n, stream_t s) {
    if (n == 0) return;
    gelu_tanh_backward_kernel<<<activation_blocks(n, 256), 256, 0, s>>>(dinp, dout, inp, n);
    cudaCheck(cudaGetLastError());
}

static inline void silu_forward(floatX* out, const floatX* inp, size_t n, stream_t s) {
    if (n == 0) return;
    silu_forward_kernel<<<activation_blocks(n, 256), 256, 0, s>>>(out, inp, n);
    cudaCheck(cudaGetLastError());
}

// dinp = dout * silu'(inp), overwritten; dinp may alias dout
static inline void silu_backward(floatX* dinp, const floatX* dout, const floatX* inp, size_t n, stream_t s) {
    if (n == 0) return;
    silu_backward_kernel<<<activation_blocks(n, 256), 256, 0, s>>>(dinp, dout, inp, n);
    cudaCheck(cudaGetLastError());
}
