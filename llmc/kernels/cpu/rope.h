/*
CPU twin of llmc/kernels/rope.cuh. Rotary embedding with adjacent pairs (x[2i], x[2i+1])
rotated by pos * theta^(-2i/hd) (llama2.c/Meta). cos/sin come from a table
[max_seq_len, hd/2] built once at start. x is [B, T, nh, hd]; in place is allowed.
*/
#pragma once
#include "../../core/common.h"

static inline void rope_forward(floatX* out, const floatX* inp, const float* cos_t, const float* sin_t, int B, int T, int nh,
                         int hd, stream_t s) {
    (void)s;
    int half = hd / 2;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < nh; h++) {
                size_t base = (((size_t)b * T + t) * nh + h) * hd;
                for (int i = 0; i < half; i++) {
                    float c = cos_t[t * half + i], sn = sin_t[t * half + i];
                    float x0 = inp[base + 2 * i], x1 = inp[base + 2 * i + 1];
                    out[base + 2 * i] = x0 * c - x1 * sn;
                    out[base + 2 * i + 1] = x0 * sn + x1 * c;
                }
            }
}

// the rotation's transpose: rotate the gradient back by -angle
static inline void rope_backward(floatX* dinp, const floatX* dout, const float* cos_t, const float* sin_t, int B, int T,
                          int nh, int hd, stream_t s) {
    (void)s;
    int half = hd / 2;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < nh; h++) {
                size_t base = (((size_t)b * T + t) * nh + h) * hd;
                for (int i = 0; i < half; i++) {
                    float c = cos_t[t * half + i], sn = sin_t[t * half + i];
                    float g0 = dout[base + 2 * i], g1 = dout[base + 2 * i + 1];
                    dinp[base + 2 * i] = g0 * c + g1 * sn;
                    dinp[base + 2 * i + 1] = -g0 * sn + g1 * c;
                }
            }
}

// q and k (H and KV heads) in place; k may be absent (KV = 0)
static inline void rope_qk_forward(floatX* q, floatX* k, const float* cos_t, const float* sin_t, int B, int T, int H,
                                   int KV, int hd, stream_t s) {
    rope_forward(q, q, cos_t, sin_t, B, T, H, hd, s);
    if (KV > 0) rope_forward(k, k, cos_t, sin_t, B, T, KV, hd, s);
}
static inline void rope_qk_backward(floatX* dq, floatX* dk, const float* cos_t, const float* sin_t, int B, int T, int H,
                                    int KV, int hd, stream_t s) {
    rope_backward(dq, dq, cos_t, sin_t, B, T, H, hd, s);
    if (KV > 0) rope_backward(dk, dk, cos_t, sin_t, B, T, KV, hd, s);
}
