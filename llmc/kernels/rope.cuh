/*
Rotary position embedding, forward and backward. CPU twin: llmc/kernels/cpu/rope.h.
Adjacent pairs (x[2i], x[2i+1]) of each head are rotated by the angle
pos * theta^(-2i/hd) (llama2.c/Meta convention); cos/sin come from a table
[max_seq_len, hd/2] built once at start. x is [B, T, nh, hd].
One thread per pair: it reads both elements before writing them, so in place
(out == inp, dinp == dout) is allowed, as in the CPU twin. Elementwise, so
deterministic.
*/
#pragma once
#include "../core/common.h"

// sign = +1: forward rotation; sign = -1: the transpose (backward)
__global__ void rope_kernel(floatX* out, const floatX* inp, const float* cos_t, const float* sin_t, int T, int nh,
                            int half, size_t n_pairs, float sign) {
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < n_pairs; p += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(p % half);
        int t = (int)((p / ((size_t)half * nh)) % T);
        size_t e = 2 * p;  // = ((b*T + t)*nh + h)*hd + 2i, since hd = 2*half
        float c = cos_t[(size_t)t * half + i], sn = sign * sin_t[(size_t)t * half + i];
        float x0 = (float)inp[e], x1 = (float)inp[e + 1];
        out[e] = (floatX)(x0 * c - x1 * sn);
        out[e + 1] = (floatX)(x0 * sn + x1 * c);
    }
}

static inline void rope_launch(floatX* out, const floatX* inp, const float* cos_t, const float* sin_t, int B, int T, int nh,
                        int hd, float sign, stream_t s) {
    if (hd % 2 != 0) FAIL("rope: head dim %d is odd", hd);
    int half = hd / 2;
    size_t n_pairs = (size_t)B * T * nh * half;
    if (n_pairs == 0) return;
    const int block = 256;
    size_t blocks = ceil_div(n_pairs, block);
    if (blocks > 65536) blocks = 65536;
    rope_kernel<<<(unsigned)blocks, block, 0, s>>>(out, inp, cos_t, sin_t, T, nh, half, n_pairs, sign);
    cudaCheck(cudaGetLastError());
}

static inline void rope_forward(floatX* out, const floatX* inp, const float* cos_t, const float* sin_t, int B, int T, int nh,
                         int hd, stream_t s) {
    rope_launch(out, inp, cos_t, sin_t, B, T, nh, hd, 1.0f, s);
}

// the rotation's transpose: rotate the gradient back by -angle
static inline void rope_backward(floatX* dinp, const floatX* dout, const float* cos_t, const float* sin_t, int B, int T,
                          int nh, int hd, stream_t s) {
    rope_launch(dinp, dout, cos_t, sin_t, B, T, nh, hd, -1.0f, s);
}
